package iceberg_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// A process killed between a load's two commits (the dead-letter table's
// landed, the raw table's not) and a restart that decodes some of the
// same records otherwise (a new release, a changed declared type or
// tokens file: what an upgrade is for): the restart's load honours what
// the killed load committed, offset by offset — an offset already a dead
// letter stays one (dlq replay can replay it), any other is stored as the
// restart decodes it. Every offset is then in exactly one of the two
// tables, none lost.
func TestRestartAfterTheDeadLettersCommitDecodingOtherwise(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after []int64 // dead letters of the killed load, of the restart's
	}{
		{"a row now a dead letter", []int64{4}, []int64{4, 5}},
		{"a dead letter now a row", []int64{4, 5}, []int64{4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sinks := prepared(t, dir, 2)
			killed, restarted := sinks[0], sinks[1]
			killed.SetBeforeTableCommit(func(table string) {
				if table == "tracelake.trace_raw" {
					runtime.Goexit() // kill -9: nothing after this runs
				}
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				f, err := killed.Stage(t.Context(), batch(0, 0, 9, c.before...))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = killed.Load(t.Context(), []sink.File{f})
				t.Error("the load went on past its raw table's commit")
			}()
			<-done
			if got := stored(t, restarted, true)[0]; !slices.Equal(got, c.before) {
				t.Fatalf("dead letters after the kill %v, want the killed load's %v", got, c.before)
			}

			l := load(t, restarted, batch(0, 0, 9, c.after...))
			dead := union(c.before, c.after)
			raw, dlq := stored(t, restarted, false)[0], stored(t, restarted, true)[0]
			if !slices.Equal(raw, seq(0, 9, dead...)) || !slices.Equal(dlq, dead) {
				t.Errorf("after the restart's load: rows at %v, dead letters at %v; want rows at %v and dead letters at %v (each offset in one table once, a dead letter kept)",
					raw, dlq, seq(0, 9, dead...), dead)
			}
			// What the load reports is what it stored: the rows, and
			// the dead letters it added (the killed load's were in).
			wantRecords, wantDLQ := int64(len(seq(0, 9, dead...))), int64(len(dead)-len(c.before))
			if len(l.Ranges) != 1 || l.Ranges[0].Records != wantRecords || l.Ranges[0].DLQ != wantDLQ {
				t.Errorf("the restart's load reported %s, want one range of %d rows and %d dead letters", reported(l), wantRecords, wantDLQ)
			}
		})
	}
}

// The owner of the killed load's range is still running (a zombie: an old
// release, slow, its partition taken by the new release's process), its
// raw table's commit yet to land, and the new owner decodes a record of
// the range a dead letter where the zombie has a row. Whichever raw commit
// lands first takes the range: the other's rows are fenced out, and the
// new owner's dead letter goes in only if its commit won — never beside
// the zombie's row.
func TestZombieOwnerBetweenItsCommitsAndARestartDecodingOtherwise(t *testing.T) {
	before, after := []int64{4}, []int64{4, 5}
	for _, c := range []struct {
		name       string
		zombieWins bool
	}{
		{"the new owner's raw commit first", false},
		{"the zombie's raw commit first", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sinks := prepared(t, t.TempDir(), 2)
			zombie, owner := sinks[0], sinks[1]
			reached, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			zombie.SetBeforeTableCommit(func(table string) {
				if table == "tracelake.trace_raw" {
					once.Do(func() {
						close(reached)
						<-release
					})
				}
			})
			zombieDone := make(chan error, 1)
			go func() {
				_, _, err := tryLoad(t, zombie, batch(0, 0, 9, before...))
				zombieDone <- err
			}()
			<-reached // its dead letters are in, its rows not

			var ownerOnce sync.Once
			if c.zombieWins {
				// The zombie's raw commit lands between the new
				// owner's dead-letter commit and its raw commit.
				owner.SetBeforeTableCommit(func(table string) {
					if table == "tracelake.trace_raw" {
						ownerOnce.Do(func() {
							close(release)
							if err := <-zombieDone; err != nil {
								t.Errorf("the zombie's load: %v", err)
							}
						})
					}
				})
			}
			l, files, err := tryLoad(t, owner, batch(0, 0, 9, after...))
			if err != nil {
				// Its raw commit lost the race to the zombie's: the
				// pipeline loads the same batch again.
				if !c.zombieWins {
					t.Fatal(err)
				}
				if l, err = owner.Load(t.Context(), files); err != nil {
					t.Fatal(err)
				}
			}
			if !c.zombieWins {
				close(release)
				<-zombieDone // fenced: whatever it answers, it stores nothing more
			}

			dead := after
			if c.zombieWins {
				dead = before
			}
			raw, dlq := stored(t, owner, false)[0], stored(t, owner, true)[0]
			if !slices.Equal(raw, seq(0, 9, dead...)) || !slices.Equal(dlq, dead) {
				t.Errorf("rows at %v, dead letters at %v; want rows at %v and dead letters at %v (each offset in one table once)",
					raw, dlq, seq(0, 9, dead...), dead)
			}
			if c.zombieWins && len(l.Ranges) == 1 && (l.Ranges[0].Records != 0 || l.Ranges[0].DLQ != 0) {
				t.Errorf("the new owner's load, fenced out, reported %s stored", reported(l))
			}
		})
	}
}

// union is the sorted offsets of a and b, each once.
func union(a, b []int64) []int64 {
	return slices.Compact(slices.Sorted(slices.Values(slices.Concat(a, b))))
}

// reported is what a load reports stored, per range.
func reported(l sink.Loaded) string {
	var out []string
	for _, r := range l.Ranges {
		out = append(out, fmt.Sprintf("%s: %d rows, %d dead letters", r, r.Records, r.DLQ))
	}
	return fmt.Sprint(out)
}
