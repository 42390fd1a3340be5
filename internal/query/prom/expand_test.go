package prom

import (
	"slices"
	"testing"
)

// TestTimeOrder: a row's points come from DuckDB's parallel aggregation
// as sorted runs in any order; their order by time keeps the first
// point of each timestamp (the earliest run's), whatever the number of
// runs.
func TestTimeOrder(t *testing.T) {
	f := func(ts []int64, want []int32) {
		t.Helper()
		if got := timeOrder(ts); !slices.Equal(got, want) {
			t.Errorf("timeOrder(%v) = %v, want %v", ts, got, want)
		}
	}
	f(nil, []int32{})
	f([]int64{5}, []int32{0})
	f([]int64{1, 2, 3}, []int32{0, 1, 2})
	f([]int64{4, 5, 6, 1, 2, 3}, []int32{3, 4, 5, 0, 1, 2})
	f([]int64{2, 4, 6, 1, 3, 5}, []int32{3, 0, 4, 1, 5, 2})
	f([]int64{7, 8, 4, 5, 1, 2}, []int32{4, 5, 2, 3, 0, 1})       // three runs: one left unpaired
	f([]int64{9, 3, 8, 2, 7, 1, 6}, []int32{5, 3, 1, 6, 4, 2, 0}) // a run per point
	f([]int64{1, 2, 3, 2, 3, 4}, []int32{0, 1, 2, 5})             // a batch loaded twice
	f([]int64{3, 3, 1, 1}, []int32{2, 0})
}
