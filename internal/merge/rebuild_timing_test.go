package merge

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
)

// BenchmarkRebuild rebuilds a CDC model from a raw table of 1M changes to
// 100k keys (4 partitions), merged in slices of offsets (each slice merged
// into what the earlier ones built: keep rows whose keys the slice does not
// touch, replace or add the slice's latest changes) versus all at once (one
// sort of every change). Run with -benchtime 1x; see docs/BENCHMARKS.md.
func BenchmarkRebuild(b *testing.B) {
	const changes, keys, partitions = 1_000_000, 100_000, 4
	l := newRawLoader(b)
	rng := rand.New(rand.NewPCG(7, 7))
	v := make([]int, keys)
	for i := range changes {
		id := rng.IntN(keys)
		v[id]++
		action := "update"
		if rng.IntN(20) == 0 {
			action = "delete"
		}
		l.add(int32(id%partitions), []byte(fmt.Sprintf(`{"action":%q,"id":%d,"v":%d,"name":"customer %d","balance":"%d.%02d"}`,
			action, id, v[id], id, rng.IntN(1e6), rng.IntN(100))))
		if i%100_000 == 99_999 {
			l.flush()
		}
	}
	l.flush()
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	for _, bc := range []struct {
		name  string
		chunk int64
	}{{"slices_of_25k_offsets", 25_000}, {"slices_of_100k_offsets", 100_000}, {"all_at_once", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := mg.Rebuild(context.Background(), customers(), bc.chunk)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.Read)/res.Took.Seconds(), "rows/s")
			}
		})
	}
}
