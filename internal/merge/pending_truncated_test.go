package merge

import (
	"maps"
	"slices"
	"testing"
)

// A source table truncated before any of its rows changed has a
// changelog table of truncations alone: its merge moves the watermarks
// and makes no model table (the model is made with the first change,
// which names the key and the columns). Pending took that for a model
// dropped to be built again (watermarks, no table) and listed it in every
// round, changed or not: each round merged it anew from its first change,
// and a round over a thousand such tables merged a thousand.
func TestChangelogModelOfTruncationsAloneIsNotPendingEveryRound(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "t", 100, nil)
	l.change(0, "items", "c", 100, row(7, "x"), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "items", "c", 110, row(8, "y"), "id")
	l.flush()
	if res := l.mustMerge(); !slices.Equal(slices.Sorted(maps.Keys(res)), []string{"cdc_db_items"}) {
		t.Errorf("a round after a change of items alone merged %v, want cdc_db_items", slices.Sorted(maps.Keys(res)))
	}
	if res := l.mustMerge(); len(res) != 0 {
		t.Errorf("a round with no change merged %v, want nothing", slices.Sorted(maps.Keys(res)))
	}
	l.change(0, "orders", "c", 200, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a")
}
