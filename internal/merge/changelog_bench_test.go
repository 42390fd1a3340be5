package merge

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkChangelogRound measures a merge round over 1,000 changelog
// tables of which 10 changed since the last round (Pending, then the
// merges of what it finds: before, the round merged all 1,000 and never
// ran Pending), beside its yardstick:
// a round over those 10 tables alone (issue: the round over all costs
// at most 2× that; unchanged tables cost next to nothing).
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
	// change updates the first `changed` tables, then merges those models.
	round := func(b *testing.B, only bool) {
		b.StopTimer()
		pos++
		for i := range changed {
			l.change(0, fmt.Sprintf("t%04d", i), "u", pos, row(1, fmt.Sprint(pos)), "id")
		}
		l.flush()
		b.StartTimer()
		// A round finds the changed tables (Pending, as merge.every
		// does) and merges them; the yardstick merges them, known.
		merge := models[:changed]
		if !only {
			var err error
			if merge, err = l.merger.Pending(context.Background()); err != nil {
				b.Fatal(err)
			}
			if len(merge) != changed {
				b.Fatalf("pending: %d tables, want %d", len(merge), changed)
			}
		}
		for _, m := range merge {
			if _, err := l.merger.Merge(context.Background(), m); err != nil {
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
