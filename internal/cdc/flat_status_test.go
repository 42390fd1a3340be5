package cdc

import (
	"strings"
	"testing"
)

// Without schemas and without an added field, a flattened row is known
// from no other message without op, and is dead-lettered saying so: one
// of a table of columns id and status (or status, id and ts_ms), whose
// status is BEGIN or END, too. It was skipped as transaction metadata, a
// row lost with no trace, where Debezium's transaction messages always
// hold all of status, id, event_count and data_collections (its struct's
// fields, which the JsonConverter writes, null ones too).
func TestDebeziumFlattenedRowOfStatusColumnsIsNoTransaction(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{`{"id":7,"status":"END"}`, `{"status":"BEGIN","id":"x","ts_ms":1700000000000}`} {
		_, err := d.Decode(nil, "srv.shop.jobs", []byte(`{"id":7}`), []byte(row))
		if err == nil || !strings.Contains(err.Error(), "ExtractNewRecordState") {
			t.Errorf("a flattened row %s: %v, want it dead-lettered naming ExtractNewRecordState", row, err)
		}
	}
}
