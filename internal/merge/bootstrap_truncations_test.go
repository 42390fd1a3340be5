package merge

import (
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// A change without a position (Maxwell's bootstrap rows) is gone when a
// truncation of its table follows it in its Kafka partition, any
// truncation, and stays otherwise, whichever merges the changes fall in.
// Two ways that depended on the rounds: a later truncation on another
// partition, merged with the row and an earlier drop on the row's own
// partition, was the only one the row was ordered against, and kept it
// (merged apart, the earlier drop removed it); and a bootstrap row merged
// before, beaten by a positioned change of its key that a drop on another
// partition then removed, was lost with it (merged with the drop, the
// bootstrap row stayed). And a drop merged after a later one (read from
// its partition later) was below the floor and removed nothing, not the
// bootstrap row it follows either.
func TestMaxwellBootstrapAgainstTruncationsWhicheverMerges(t *testing.T) {
	type event struct {
		partition int32
		typ, pos  string
		data      string
	}
	for _, tc := range []struct {
		name          string
		first, second []event
		want          []string
	}{{
		name: "an earlier drop on its partition, a later one on another",
		first: []event{
			{0, "bootstrap-insert", "", `{"id":9,"name":"read before the drop"}`},
			{0, "table-drop", "binlog.000001:200", ""},
		},
		second: []event{
			{1, "insert", "binlog.000001:250", `{"id":1,"name":"a"}`},
			{1, "table-drop", "binlog.000001:300", ""},
		},
	}, {
		// The consumer read partition 1 ahead of partition 0: the later
		// drop merged first, and the earlier one, below the model's
		// floor, removed nothing, not even the row it follows.
		name: "a later drop on another partition merged first",
		first: []event{
			{0, "bootstrap-insert", "", `{"id":9,"name":"read before the drop"}`},
			{1, "insert", "binlog.000001:250", `{"id":1,"name":"a"}`},
			{1, "table-drop", "binlog.000001:300", ""},
		},
		second: []event{
			{0, "table-drop", "binlog.000001:200", ""},
		},
	}, {
		name: "beaten by a change the drop removes",
		first: []event{
			{1, "bootstrap-insert", "", `{"id":9,"name":"p1"}`},
			{0, "update", "binlog.000001:100", `{"id":9,"name":"updated"}`},
		},
		second: []event{
			{0, "table-drop", "binlog.000001:200", ""},
		},
		want: []string{"9|p1"},
	}} {
		for _, split := range []bool{false, true} {
			l := newFormatLoader(t, cdc.FormatMaxwell)
			for i, events := range [][]event{tc.first, tc.second} {
				if i > 0 && split {
					l.flush()
					l.mustMerge()
				}
				for _, e := range events {
					l.raw(e.partition, "maxwell", maxwellOrders(e.typ, e.pos, e.data))
				}
			}
			l.flush()
			l.mustMerge()
			t.Logf("%s, merged apart: %v", tc.name, split)
			l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, tc.want...)
		}
	}
}

// maxwellOrders is a Maxwell message of test.orders: its type, its binlog
// position (none for "") and its row (none for "", keyed by id).
func maxwellOrders(typ, position, data string) string {
	m := `{"database":"test","table":"orders","type":"` + typ + `","ts":1700000000`
	if position != "" {
		m += `,"position":"` + position + `"`
	}
	if data != "" {
		m += `,"data":` + data + `,"primary_key_columns":["id"]`
	}
	return m + `}`
}
