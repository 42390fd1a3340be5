package sink

import (
	"math/rand/v2"
	"testing"
)

// Coverage agrees with counting every offset in a map, for scans with
// runs, gaps, duplicates within a table and across the two tables, and
// rows out of order.
func TestCoverageAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var raw, dlq Offsets
		seen := map[int64]int{}
		o := int64(rng.IntN(50))
		for range rng.IntN(300) {
			switch rng.IntN(10) {
			case 0:
				o += int64(rng.IntN(20)) // a gap
			case 1:
				o -= int64(rng.IntN(30)) // back: duplicates, or another file's rows
				o = max(o, 0)
			}
			if rng.IntN(8) == 0 {
				dlq.Add(o)
			} else {
				raw.Add(o)
			}
			seen[o]++
			o++
		}
		union, dups := Coverage(&raw, nil, &dlq)
		var wantDups, distinct int64
		for _, n := range seen {
			wantDups += int64(n - 1)
			distinct++
		}
		var got int64
		for i, r := range union {
			if i > 0 && r.First <= union[i-1].Last+1 {
				t.Fatalf("trial %d: runs %v and %v touch", trial, union[i-1], r)
			}
			for off := r.First; off <= r.Last; off++ {
				if seen[off] == 0 {
					t.Fatalf("trial %d: offset %d in the union, never added", trial, off)
				}
			}
			got += r.Last - r.First + 1
		}
		if dups != wantDups || got != distinct || raw.Count()+dlq.Count() != int64(len(seen))+wantDups {
			t.Fatalf("trial %d: %d duplicates, %d distinct; want %d, %d", trial, dups, got, wantDups, distinct)
		}
	}
}
