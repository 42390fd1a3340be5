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

// killBefore makes s's load stop for good (kill -9) just before its
// commit of table, and runs the load of b there.
func killBefore(t *testing.T, s interface {
	SetBeforeTableCommit(func(string))
}, table string, load func()) {
	t.Helper()
	s.SetBeforeTableCommit(func(name string) {
		if name == table {
			runtime.Goexit() // nothing after this runs
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		load()
		t.Error("the load went on past the commit it was killed before")
	}()
	<-done
}

// One load of two partitions, one left in doubt by a killed load, the
// other loaded for the first time: each is decided by its own state — the
// first keeps its dead letter and adds the one now decoded so, the second
// stores its rows and dead letter as decoded.
func TestInDoubtPartitionBesideAFreshOneInOneLoad(t *testing.T) {
	sinks := prepared(t, t.TempDir(), 2)
	killed, restarted := sinks[0], sinks[1]
	killBefore(t, killed, "tracelake.trace_raw", func() {
		f, err := killed.Stage(t.Context(), batch(0, 0, 9, 4))
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = killed.Load(t.Context(), []sink.File{f})
	})
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
			killBefore(t, killed, c.killedBefore, func() {
				f, err := killed.Stage(t.Context(), derivedBatch(0, 9, c.before...))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = killed.Load(t.Context(), []sink.File{f})
			})
			load(t, restarted, derivedBatch(0, 9, c.after...))
			spans, dlq := stored(t, restarted, false)[0], stored(t, restarted, true)[0]
			ops := operationOffsets(t, operations(t, restarted))
			if !slices.Equal(spans, seq(0, 9, c.dead...)) || !slices.Equal(dlq, c.dead) || !slices.Equal(ops, spans) {
				t.Errorf("spans at %v, operations at %v, dead letters at %v; want spans and operations at %v, dead letters at %v (an offset a dead letter or a span with its operation, not both)",
					spans, ops, dlq, seq(0, 9, c.dead...), c.dead)
			}
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
			spans, dlq := stored(t, owner, false)[0], stored(t, owner, true)[0]
			ops := operationOffsets(t, operations(t, owner))
			if !slices.Equal(spans, seq(0, 9, dead...)) || !slices.Equal(dlq, dead) || !slices.Equal(ops, spans) {
				t.Errorf("spans at %v, operations at %v, dead letters at %v; want spans and operations at %v, dead letters at %v",
					spans, ops, dlq, seq(0, 9, dead...), dead)
			}
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
			killBefore(t, killed, "tracelake.spans", func() {
				f, err := killed.Stage(t.Context(), derivedBatch(10, 19))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = killed.Load(t.Context(), []sink.File{f})
			})
			stopped := make(chan struct{})
			restarted.SetBeforeMaintenanceCommit(func() {
				close(stopped)
				runtime.Goexit() // the deletion's commit: the load stops there
			})
			go func() {
				f, err := restarted.Stage(t.Context(), derivedBatch(10, 19, 15))
				if err != nil {
					t.Error(err)
					close(stopped)
					return
				}
				_, _ = restarted.Load(t.Context(), []sink.File{f})
				t.Error("the load went on past the deletion it was stopped at")
			}()
			<-stopped
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
			dead := []int64{3, 15}
			spans, dlq := stored(t, retried, false)[0], stored(t, retried, true)[0]
			ops := operationOffsets(t, operations(t, retried))
			if !slices.Equal(spans, seq(0, last, dead...)) || !slices.Equal(dlq, dead) || !slices.Equal(ops, spans) {
				t.Errorf("spans at %v, operations at %v, dead letters at %v; want spans and operations at %v, dead letters at %v",
					spans, ops, dlq, seq(0, last, dead...), dead)
			}
			raw, _ := retried.Identifiers()
			tbl, err := retried.Catalog().LoadTable(t.Context(), raw)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tbl.Properties() {
				if strings.HasPrefix(k, "tracelake.dead-derived.") {
					t.Errorf("the mark %s=%s is left after the deletion", k, v)
				}
			}
		})
	}
}
