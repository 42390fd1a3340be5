package cdc

import (
	"strings"
	"testing"
)

// SchemaChangeServer knows a schema change message by what it carries
// (no op; ddl or tableChanges), whatever its topic, and gives its server;
// a change event, a heartbeat, transaction metadata, a tombstone and any
// Canal or Maxwell message are none.
func TestSchemaChangeServer(t *testing.T) {
	dbz, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	canal, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	drop := debeziumDrop("false") // in a Connect envelope
	bare := strings.TrimSuffix(strings.TrimPrefix(drop, `{"schema":{},"payload":`), "}")
	for _, tc := range []struct {
		name, value string
		dec         *Decoder
		server      string
		ok          bool
	}{
		{"drop", drop, dbz, "dbserver1", true},
		{"drop without the envelope", " \n" + bare, dbz, "dbserver1", true},
		{"snapshot statement", debeziumDrop("true"), dbz, "dbserver1", true},
		{"drop database, no tableChanges", `{"source":{"name":"prod"},"databaseName":"db","ddl":"DROP DATABASE db"}`, dbz, "prod", true},
		{"no server", `{"source":{},"ddl":"CREATE TABLE t (id INT)","tableChanges":[]}`, dbz, "", true},
		{"change event", `{"op":"c","before":null,"after":{"id":1},"source":{"name":"dbserver1","db":"db","table":"t"}}`, dbz, "", false},
		{"heartbeat", `{"ts_ms":1}`, dbz, "", false},
		{"transaction metadata", `{"status":"BEGIN","id":"x"}`, dbz, "", false},
		{"tombstone", `null`, dbz, "", false},
		{"wrapped tombstone", `{"schema":null,"payload":null}`, dbz, "", false},
		{"canal ddl", `{"database":"db","table":"t","isDdl":true,"sql":"DROP TABLE t","type":"ERASE","ddl":"x"}`, canal, "", false},
	} {
		server, ok := tc.dec.SchemaChangeServer([]byte(tc.value))
		if server != tc.server || ok != tc.ok {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, server, ok, tc.server, tc.ok)
		}
	}
}
