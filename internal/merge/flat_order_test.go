package merge

import (
	"strconv"
	"testing"
)

// flatRow is a change of db.orders as Debezium's ExtractNewRecordState
// flattens it with add.fields=op,db,table (schemas off): the row, __op,
// __db and __table, and no position.
func (l *changeLoader) flatRow(op string, id int, v string) {
	l.t.Helper()
	l.rawKey(0, "dbserver1", `{"id":`+strconv.Itoa(id)+`}`,
		`{"id":`+strconv.Itoa(id)+`,"v":"`+v+`","__op":"`+op+`","__db":"db","__table":"orders"}`)
}

// A connector that gets ExtractNewRecordState (flattening) after it ran
// without it, as the SMT's documentation has one do for a sink, sends its
// changes without a position where the earlier ones had one (add.fields
// names none by default). They are its live changes, in Kafka order after
// the earlier ones of their key: a flattened update of a row the model
// holds from a positioned change is newer than it, not older, whether
// merged with it or after it.
func TestChangelogModelFlattenedChangesAfterPositionedOnesApply(t *testing.T) {
	for _, split := range []bool{false, true} {
		l := newChangeLoader(t)
		l.change(0, "orders", "r", 100, row(1, "a"), "id")
		l.change(0, "orders", "r", 100, row(2, "b"), "id")
		l.change(0, "orders", "u", 120, row(1, "a1"), "id")
		if split {
			l.flush()
			l.mustMerge()
		}
		l.flatRow("u", 1, "a2")
		l.flatRow("u", 2, "b2")
		l.flatRow("c", 3, "c")
		l.flush()
		l.mustMerge()
		l.flatRow("u", 2, "b3")
		l.flatRow("d", 3, "c")
		l.flush()
		l.mustMerge()
		l.want(`SELECT count(*) FROM cdc_dlq`, "0")
		l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a2", "2|b3")
	}
}
