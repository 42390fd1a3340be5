package merge

import (
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// Maxwell writes a MySQL JSON column's document as it is
// (JsonColumnDef.asJSON returns a RawJSONString), so a column of
// objects also brings the documents that are a string, a number or a
// boolean, bare. Each is a JSON document of the column, which was made
// JSON by its first object: they were dead-lettered as changing its type
// to VARCHAR, BIGINT or BOOLEAN.
func TestInferredScalarsGoIntoAJSONColumnAsDocuments(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000000, `{"id":1,"doc":{"a":1}}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000001, `{"id":2,"doc":[1,2]}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000002, `{"id":3,"doc":"text"}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000003, `{"id":4,"doc":5}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000004, `{"id":5,"doc":true}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000005, `{"id":6,"doc":12.50}`, ""))
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_dlq`, "0")
	l.want(`SELECT id, doc::VARCHAR, json_type(doc) FROM cdc_test_orders`,
		`1|{"a":1}|OBJECT`, "2|[1,2]|ARRAY", `3|"text"|VARCHAR`, "4|5|UBIGINT", "5|true|BOOLEAN", "6|12.5|DOUBLE")
}

// Debezium without schemas writes a JSON column's document as its text in
// a string (io.debezium.data.Json, as with schemas). In a column a
// schema-typed change made JSON (the connector's converter switched to
// schemas off), such a string was taken for a string document, as
// Maxwell's bare scalars are: {"a":2} was stored as the JSON string
// "{\"a\":2}", silently, where it was dead-lettered before. It stays
// dead-lettered: its row is not lost, and the model holds no wrong value.
func TestDebeziumJSONTextWithoutSchemasIsNotAStringDocument(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatDebezium)
	const topic = "pg.public.items"
	fields := `[{"field":"id","type":"int32"},{"field":"doc","type":"string","optional":true,"name":"io.debezium.data.Json"}]`
	on := `{"schema":{"type":"struct","fields":[{"field":"before","type":"struct","optional":true,"fields":` + fields +
		`},{"field":"after","type":"struct","optional":true,"fields":` + fields + `}]},"payload":{"before":null,"after":{"id":1,"doc":"{\"a\":1}"},` +
		`"source":{"version":"2.7.0.Final","connector":"postgresql","name":"pg","ts_ms":1700000000000,"db":"app","schema":"public","table":"items","lsn":100},"op":"c","ts_ms":1700000000100}}`
	off := `{"before":null,"after":{"id":2,"doc":"{\"a\":2}"},` +
		`"source":{"version":"2.7.0.Final","connector":"postgresql","name":"pg","ts_ms":1700000000000,"db":"app","schema":"public","table":"items","lsn":200},"op":"c","ts_ms":1700000000100}`
	l.rawKey(0, topic, `{"id":1}`, on)
	l.flush()
	l.rawKey(0, topic, `{"id":2}`, off)
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT id, doc::VARCHAR, json_type(doc) FROM cdc_app_items ORDER BY id`, `1|{"a":1}|OBJECT`)
	l.want(`SELECT count(*) FROM cdc_dlq`, "1")
}
