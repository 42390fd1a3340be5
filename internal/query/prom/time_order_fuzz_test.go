package prom

import (
	"math/rand"
	"slices"
	"testing"
)

// TestTimeOrderIsAStableSortKeepingOnePerTime: timeOrder's merge of
// sorted runs orders any times as a stable sort does, one per time.
func TestTimeOrderIsAStableSortKeepingOnePerTime(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for it := 0; it < 20000; it++ {
		n := r.Intn(12)
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = int64(r.Intn(6))
		}
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return int(ts[a] - ts[b]) })
		want = slices.CompactFunc(want, func(a, b int32) bool { return ts[a] == ts[b] })
		got := timeOrder(ts)
		// times must match; which index kept among equals may differ
		if len(got) != len(want) {
			t.Fatalf("%v: got %v want %v", ts, got, want)
		}
		for i := range got {
			if ts[got[i]] != ts[want[i]] {
				t.Fatalf("%v: got %v want %v", ts, got, want)
			}
		}
	}
}
