package merge

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkChangelogRound measures a merge round over 1,000 changelog
// tables of which 10 changed since the last round (Pending, then those
// merges, then the done marks of every table), beside its yardstick: merging those 10 tables' models alone
// (issue: the round over all costs at most 2× that; unchanged tables
// cost next to nothing).
func BenchmarkChangelogRound(b *testing.B) {
	const tables, changed = 1000, 10
	l := newChangeLoader(b)
	for i := range tables {
		l.change(0, fmt.Sprintf("t%04d", i), "c", 100, row(1, "a"), "id")
	}
	l.flush()
	l.mustMerge()
	models, err := l.merger.Models(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	pos := 100
	// round updates the first `changed` tables, then merges: as a round of
	// merge.every does (the pending tables, found among all), or the changed
	// tables' models alone (the yardstick).
	round := func(b *testing.B, only bool) {
		b.StopTimer()
		pos++
		for i := range changed {
			l.change(0, fmt.Sprintf("t%04d", i), "u", pos, row(1, fmt.Sprint(pos)), "id")
		}
		l.flush()
		b.StartTimer()
		merge := models[:changed]
		if !only {
			var err error
			if merge, err = l.merger.Pending(context.Background()); err != nil {
				b.Fatal(err)
			}
			if len(merge) != changed {
				b.Fatalf("%d tables pending, want %d", len(merge), changed)
			}
		}
		for _, m := range merge {
			if _, err := l.merger.Merge(context.Background(), m); err != nil {
				b.Fatal(err)
			}
		}
		if !only {
			if _, err := l.merger.MarkReady(context.Background(), Marking{Now: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("all_1000_tables", func(b *testing.B) {
		for b.Loop() {
			round(b, false)
		}
	})
	b.Run("yardstick_the_10_changed_alone", func(b *testing.B) {
		for b.Loop() {
			round(b, true)
		}
	})
}
