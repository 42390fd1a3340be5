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
