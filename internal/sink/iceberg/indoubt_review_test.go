package iceberg_test

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// killBefore makes s's load of batches, in one load, stop for good
// (kill -9) just before its commit of table.
func killBefore(t *testing.T, s *iceberg.Sink, table string, batches ...*sink.Batch) {
	t.Helper()
	s.SetBeforeTableCommit(func(name string) {
		if name == table {
			runtime.Goexit() // nothing after this runs
		}
	})
	loadUntilStopped(t, s, "the commit it was killed before", batches...)
}

// stopAtMaintenance makes s's load of batches stop for good at its first
// commit that is not a table's load (after its spans' commit: the
// deletion of a killed load's operations at its dead letters).
func stopAtMaintenance(t *testing.T, s *iceberg.Sink, batches ...*sink.Batch) {
	t.Helper()
	s.SetBeforeMaintenanceCommit(func() { runtime.Goexit() })
	loadUntilStopped(t, s, "the commit it was stopped at", batches...)
}

// loadUntilStopped stages batches in s and loads them in one load, on a
// goroutine that a hook of s ends (runtime.Goexit), and waits for that.
func loadUntilStopped(t *testing.T, s *iceberg.Sink, at string, batches ...*sink.Batch) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var files []sink.File
		for _, b := range batches {
			f, err := s.Stage(t.Context(), b)
			if err != nil {
				t.Error(err)
				return
			}
			files = append(files, f)
		}
		_, _ = s.Load(t.Context(), files)
		t.Error("the load went on past " + at)
	}()
	<-done
}

// compactDeadLettersAway compacts the dead-letter table (its files
// rewritten) and expires the snapshots before: the files loads staged
// and committed there are gone, their dead letters not.
func compactDeadLettersAway(t *testing.T, maint *iceberg.Sink) {
	t.Helper()
	done, err := maint.Compact(t.Context(), 64<<20, everyDay, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(done, func(c iceberg.Compaction) bool {
		return c.Table == "tracelake.spans_dlq" && c.FilesBefore > c.FilesAfter
	}) {
		t.Fatalf("compaction %+v did not rewrite the dead letters' files", done)
	}
	if _, err := maint.Expire(t.Context(), 0, 1); err != nil {
		t.Fatal(err)
	}
}

// wantSpansAndDeadLetters checks partition 0 of s: a dead letter at each
// offset of dead, a span and its operation at every other offset of
// first..last, no offset both.
func wantSpansAndDeadLetters(t *testing.T, s *iceberg.Sink, first, last int64, dead ...int64) {
	t.Helper()
	spans, dlq := stored(t, s, false)[0], stored(t, s, true)[0]
	ops := operationOffsets(t, operations(t, s))
	if !slices.Equal(spans, seq(first, last, dead...)) || !slices.Equal(dlq, dead) || !slices.Equal(ops, spans) {
		t.Errorf("spans at %v, operations at %v, dead letters at %v; want spans and operations at %v, dead letters at %v",
			spans, ops, dlq, seq(first, last, dead...), dead)
	}
}

// One load of two partitions, one left in doubt by a killed load, the
// other loaded for the first time: each is decided by its own state — the
// first keeps its dead letter and adds the one now decoded so, the second
// stores its rows and dead letter as decoded.
func TestInDoubtPartitionBesideAFreshOneInOneLoad(t *testing.T) {
	sinks := prepared(t, t.TempDir(), 2)
	killed, restarted := sinks[0], sinks[1]
	killBefore(t, killed, "tracelake.trace_raw", batch(0, 0, 9, 4))
	load(t, restarted, batch(0, 0, 9, 4, 5), batch(1, 0, 9, 3))
	raw, dlq := stored(t, restarted, false), stored(t, restarted, true)
	for p, dead := range map[int32][]int64{0: {4, 5}, 1: {3}} {
		if !slices.Equal(raw[p], seq(0, 9, dead...)) || !slices.Equal(dlq[p], dead) {
			t.Errorf("partition %d: rows at %v, dead letters at %v; want rows at %v, dead letters at %v", p, raw[p], dlq[p], seq(0, 9, dead...), dead)
		}
	}
}

// derivedBatch is sinktest.DerivedBatch with the offsets in bad dead
// letters (no span, no operation).
func derivedBatch(first, last int64, bad ...int64) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: last}
	for o := first; o <= last; o++ {
		if slices.Contains(bad, o) {
			rec := &kgo.Record{Topic: "traces", Offset: o, Value: []byte{0xfe}, Timestamp: time.Now()}
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not OTLP", envelope.StageDecode)
			r.DLQ++
			continue
		}
		one := sinktest.DerivedBatch(o, o, 1)
		b.Rows, b.Derived = append(b.Rows, one.Rows...), append(b.Derived, one.Derived...)
		r.Records += one.Ranges[0].Records
	}
	b.Ranges = []sink.Range{r}
	return b
}

// operationOffsets are the offsets of the ops table's rows ("op N").
func operationOffsets(t *testing.T, ops []string) []int64 {
	t.Helper()
	var out []int64
	for _, op := range ops {
		n, err := strconv.ParseInt(strings.Fields(op)[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// A load killed after its dead letters' and operations' commits, before
// its spans': the restart decodes a record the killed load stored an
// operation of as a dead letter now (a changed declared type). The offset
// is then a dead letter only: no operation of it stays beside the dead
// letter, without the span it was derived from. The same whether the
// killed load had dead letters (offsets in doubt) or none (its
// dead-letter table's commit had nothing to add).
func TestInDoubtDeadLetterHasNoOperationOfTheKilledLoad(t *testing.T) {
	for _, c := range []struct {
		name                string
		killedBefore        string
		before, after, dead []int64
	}{
		{"killed before the spans' commit", "tracelake.spans", []int64{4}, []int64{4, 5}, []int64{4, 5}},
		{"killed before the spans' commit, no dead letter before", "tracelake.spans", nil, []int64{5}, []int64{5}},
		{"killed before the operations' commit", "tracelake.ops", []int64{4}, []int64{4, 5}, []int64{4, 5}},
		{"a dead letter now a row, killed before the spans' commit", "tracelake.spans", []int64{4, 5}, []int64{4}, []int64{4, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			killed, restarted := openDerived(t, dir), openDerived(t, dir)
			killBefore(t, killed, c.killedBefore, derivedBatch(0, 9, c.before...))
			load(t, restarted, derivedBatch(0, 9, c.after...))
			wantSpansAndDeadLetters(t, restarted, 0, 9, c.dead...)
		})
	}
}

// The owner of a load whose operations' commit landed is still running,
// its spans' commit yet to land, when the new owner decodes a record of
// the range a dead letter where the old one has a span. Whichever spans'
// commit lands first takes the range: the new owner deletes the old
// one's operation of its dead letter only when its own commit won; when
// the old one's won, that operation is of the span it stored, and stays.
func TestZombieOperationsAndANewOwnersDeadLetter(t *testing.T) {
	for _, zombieWins := range []bool{false, true} {
		t.Run(fmt.Sprintf("zombie's spans first %v", zombieWins), func(t *testing.T) {
			dir := t.TempDir()
			zombie, owner := openDerived(t, dir), openDerived(t, dir)
			reached, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			zombie.SetBeforeTableCommit(func(table string) {
				if table == "tracelake.spans" {
					once.Do(func() {
						close(reached)
						<-release
					})
				}
			})
			zombieDone := make(chan error, 1)
			go func() {
				_, _, err := tryLoad(t, zombie, derivedBatch(0, 9, 4))
				zombieDone <- err
			}()
			<-reached // its dead letters and operations are in, its spans not
			var ownerOnce sync.Once
			if zombieWins {
				owner.SetBeforeTableCommit(func(table string) {
					if table == "tracelake.spans" {
						ownerOnce.Do(func() {
							close(release)
							if err := <-zombieDone; err != nil {
								t.Errorf("the zombie's load: %v", err)
							}
						})
					}
				})
			}
			_, files, err := tryLoad(t, owner, derivedBatch(0, 9, 4, 5))
			if err != nil {
				if !zombieWins {
					t.Fatal(err)
				}
				if _, err = owner.Load(t.Context(), files); err != nil {
					t.Fatal(err)
				}
			}
			if !zombieWins {
				close(release)
				<-zombieDone
			}
			dead := []int64{4, 5}
			if zombieWins {
				dead = []int64{4}
			}
			wantSpansAndDeadLetters(t, owner, 0, 9, dead...)
		})
	}
}

// A load stopped after its spans' commit, before it deleted the killed
// load's operations at its dead letters: its main commit marked those
// offsets, and the process started again deletes the operations there —
// at the next load of the partition (the same records sent again, or the
// records after them) or when it is assigned the partition — even after
// maintenance compacted the dead-letter table and expired the snapshots
// before. Without the mark, the retry found every table's positions past
// the range and committed nothing: the operations stayed for good beside
// the dead letters, derived from spans no table holds.
func TestInDoubtDeletionFinishedAfterTheLoadStopped(t *testing.T) {
	for _, resumed := range []string{"the same records", "the next records", "the assignment"} {
		t.Run(resumed, func(t *testing.T) {
			dir := t.TempDir()
			killed, restarted, maint := openDerived(t, dir), openDerived(t, dir), openDerived(t, dir)
			// A day of dead letters already: with the load's, two files
			// to compact into one.
			load(t, restarted, derivedBatch(0, 9, 3))
			killBefore(t, killed, "tracelake.spans", derivedBatch(10, 19))
			stopAtMaintenance(t, restarted, derivedBatch(10, 19, 15))
			compactDeadLettersAway(t, maint)
			retried := openDerived(t, dir) // the stopped load's process, started again
			last := int64(19)
			switch resumed {
			case "the same records":
				load(t, retried, derivedBatch(10, 19, 15))
			case "the next records":
				load(t, retried, derivedBatch(20, 24))
				last = 24
			case "the assignment":
				if _, err := retried.Positions(t.Context(), []sink.TopicPartition{{Topic: "traces"}}); err != nil {
					t.Fatal(err)
				}
			}
			wantSpansAndDeadLetters(t, retried, 0, last, 3, 15)
			if marks := deadDerivedMarks(t, retried); len(marks) != 0 {
				t.Errorf("the marks %v are left after the deletion", marks)
			}
		})
	}
}
