package cdc

import "testing"

// A PostgreSQL json[] or jsonb[] comes from Debezium as an array of
// io.debezium.data.Json, each document the text of a string
// (PostgresValueConverter.schemaBuilder: JSONB_ARRAY and JSON_ARRAY,
// SchemaBuilder.array(Json.builder())). The changelog's JSON holds the
// documents, as PostgreSQL's to_json writes the array ([{"a": 1}]) and as
// a json column's document is held: kept as strings, the model held
// ["{\"a\": 1}"], an array of text no JSON path reads into.
func TestDebeziumJSONArrayHoldsItsDocuments(t *testing.T) {
	fields := []string{`{"type":"array","optional":true,"items":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"field":"docs"}`}
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, `"docs":["{\"a\": 1}",null,"[1, \"x\"]","\"s\""]`)))
	if err != nil {
		t.Fatal(err)
	}
	if v, want := columnValues(&got[0])["docs"], `[{"a": 1},null,[1, "x"],"s"]`; v != want {
		t.Errorf("docs = %s, want %s", v, want)
	}
	// An item that is no JSON text is refused.
	if _, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, `"docs":["{\"a\": "]`))); err == nil {
		t.Errorf("a jsonb[] item that is no JSON: no error")
	}
}
