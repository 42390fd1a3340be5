package merge

import "testing"

// A key column may hold NULL where the key is not the table's primary key
// (Debezium's message.key.columns naming a nullable unique key): a NULL
// is a key part like any other, as reconcile takes it. The merge matched
// key parts with =, which a NULL never meets: each change of such a key
// added a row beside the key's older ones, a delete removed none, and a
// late change came back beside its tombstone.
func TestChangelogModelKeyWithANullPart(t *testing.T) {
	l := newChangeLoader(t)
	r := func(b any, v string) map[string]any { return map[string]any{"a": 1, "b": b, "v": v} }
	l.change(0, "orders", "c", 100, r(nil, "x"), "a", "b")
	l.change(0, "orders", "c", 105, r(2, "x2"), "a", "b")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "u", 110, r(nil, "y"), "a", "b")
	l.flush()
	l.mustMerge()
	l.want(`SELECT a, coalesce(b, -1), v FROM cdc_db_orders`, "1|-1|y", "1|2|x2")
	l.change(0, "orders", "d", 120, r(nil, "y"), "a", "b")
	l.flush()
	l.mustMerge()
	l.want(`SELECT a, coalesce(b, -1), v FROM cdc_db_orders`, "1|2|x2")
	l.change(0, "orders", "u", 115, r(nil, "late"), "a", "b")
	l.flush()
	l.mustMerge()
	l.want(`SELECT a, coalesce(b, -1), v FROM cdc_db_orders`, "1|2|x2")
}
