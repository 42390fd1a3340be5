package merge

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkModelRound measures one merge round of a versioned model
// (customers) whose target holds ~1M keys (some deleted: tombstones), each
// round merging 10k new changes over 4 partitions: most a newer version of
// a key, some a tie with the key's version on another partition, some
// deletes, some stale (older than the key's row). It reports the merge's
// own time per round (ms/round, and the median round); loading the round's raw rows is not
// timed. Run with -benchtime 20x; see docs/BENCHMARKS.md.
func BenchmarkModelRound(b *testing.B) {
	const keys, perRound, partitions = 1_000_000, 10_000, 4
	l := newRawLoader(b)
	rng := rand.New(rand.NewPCG(11, 11))
	v := make([]int, keys)
	change := func(id int, action string) {
		l.add(int32(rng.IntN(partitions)), []byte(fmt.Sprintf(`{"action":%q,"id":%d,"v":%d,"name":"customer %d","balance":"%d.%02d"}`,
			action, id, v[id], id, rng.IntN(1e6), rng.IntN(100))))
	}
	for id := range keys {
		v[id] = 1
		action := "update"
		if id%50 == 0 {
			action = "delete"
		}
		change(id, action)
		if id%200_000 == 199_999 {
			l.flush()
		}
	}
	l.flush()
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if _, err := mg.Merge(ctx, customers()); err != nil {
		b.Fatal(err)
	}
	var took []float64
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for range perRound {
			id := rng.IntN(keys)
			switch r := rng.IntN(100); {
			case r < 10: // a tie with the key's version
			case r < 15: // stale: older than the key's row
				old := v[id]
				v[id] = max(old-1, 0)
				change(id, "update")
				v[id] = old
				continue
			default:
				v[id]++
			}
			action := "update"
			if rng.IntN(10) == 0 {
				action = "delete"
			}
			change(id, action)
		}
		l.flush()
		b.StartTimer()
		before := cpuTime(b)
		res, err := mg.Merge(ctx, customers())
		cpu += cpuTime(b) - before
		if err != nil {
			b.Fatal(err)
		}
		if res.Read != perRound {
			b.Fatalf("round read %d raw rows, want %d", res.Read, perRound)
		}
		took = append(took, float64(res.Took.Microseconds())/1000)
	}
	// The mean counts the rounds that also checkpoint DuckDB's write-ahead
	// log (what a round writes adds to it); the median is a round's own work.
	slices.Sort(took)
	var sum float64
	for _, ms := range took {
		sum += ms
	}
	b.ReportMetric(sum/float64(len(took)), "ms/round")
	b.ReportMetric(took[len(took)/2], "median_ms/round")
	// The process's CPU time (DuckDB's threads are its own) varies far
	// less than the wall time on a machine shared with other work.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu_ms/round")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
