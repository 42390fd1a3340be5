package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// Derived rows are committed with each load, fenced by the derived
// table's own positions: a batch its positions cover in part (a former
// owner's) is written again without the covered rows; decimals stay
// exact.
func TestDerivedRowsAreCommittedAndFenced(t *testing.T) {
	ctx := context.Background()
	s := openDerived(t, t.TempDir())
	load(t, s, sinktest.DerivedBatch(0, 9, 123456))
	l := load(t, s, sinktest.DerivedBatch(5, 14, 123456), sinktest.DerivedBatch(15, 19, 123456))
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 20 {
		t.Errorf("loaded %+v, want the 20 span rows past offset 9", l.Ranges)
	}
	want := func(from, to int64, price string) []string {
		var out []string
		for o := from; o <= to; o++ {
			out = append(out, fmt.Sprintf("op %d %s.%012d", o, price, o))
		}
		slices.Sort(out)
		return out
	}
	if got := operations(t, s); !slices.Equal(got, want(0, 19, "123456")) {
		t.Errorf("operations\n%v\nwant\n%v", got, want(0, 19, "123456"))
	}

	// A rebuild replaces every operation and takes the spans' positions:
	// the next load adds only the operations past them.
	r, err := s.BeginRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := opRows(20, 654321)
	if n, err := s.ReplaceDerived(ctx, r, [][]byte{rebuilt}); err != nil || n != 20 {
		t.Fatalf("rebuild: %d rows, %v", n, err)
	}
	load(t, s, sinktest.DerivedBatch(15, 24, 123456))
	after := append(want(0, 19, "654321"), want(20, 24, "123456")...)
	slices.Sort(after)
	if got := operations(t, s); !slices.Equal(got, after) {
		t.Errorf("after the rebuild and a load:\n%v\nwant\n%v", got, after)
	}
	// Maintenance looks after the derived table too.
	compacted, err := s.Compact(ctx, 512<<20, time.Now().Add(72*time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(compacted, func(c iceberg.Compaction) bool { return c.Table == "tracelake.ops" && c.Groups > 0 }) {
		t.Errorf("compaction plans nothing for tracelake.ops: %+v", compacted)
	}
}

// operations reads the ops table: each row's name and cost, sorted.
func operations(t *testing.T, s *iceberg.Sink) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, s.DerivedIdentifier())
	if err != nil {
		t.Fatal(err)
	}
	if spec := tbl.Spec(); spec.NumFields() != 0 {
		t.Errorf("ops is partitioned by %v; it names no tenant or time", spec)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		names := rec.Column(0).(*array.String)
		costs := rec.Column(1).(*array.Decimal128)
		for i := range int(rec.NumRows()) {
			got = append(got, names.Value(i)+" "+costs.Value(i).ToString(12))
		}
		rec.Release()
	}
	slices.Sort(got)
	return got
}

// openDerived opens a prepared sink of Spans with Ops derived from them
// in dir's catalog.
func openDerived(t *testing.T, dir string) *iceberg.Sink {
	t.Helper()
	return openPrepared(t, dir, iceberg.Options{Table: "spans", Typed: &sinktest.Spans, Derived: &sinktest.Ops, DerivedTable: "ops"})
}

// raceSpans makes s's commits to the spans table lose races: before each
// of them while racing() holds, other (a second instance) loads a batch of
// partition 1 of its own.
func raceSpans(t *testing.T, s, other *iceberg.Sink, racing func() bool) {
	next := int64(0)
	s.SetBeforeTableCommit(func(table string) {
		if table == "tracelake.spans" && racing() {
			loadSpansOfPartition1(t, other, next)
			next++
		}
	})
}

// loadSpansOfPartition1 loads into other (a second instance) the spans of
// offset off of partition 1, a commit of the spans table of its own.
func loadSpansOfPartition1(t *testing.T, other *iceberg.Sink, off int64) {
	t.Helper()
	b := sinktest.DerivedBatch(off, off, 1)
	b.Rows, b.Derived = bytes.ReplaceAll(b.Rows, []byte(`"kpartition":0`), []byte(`"kpartition":1`)), nil
	b.Ranges[0].Partition = 1
	load(t, other, b)
}

// A load whose operations' commit landed and whose spans' commit then lost
// a race (another instance, compaction) commits the spans again at once:
// failed, it left the operations ahead of the spans, with nothing to
// bring the spans there for a caller that does not retry the same batch.
func TestLostRaceAfterTheDerivedCommitIsCommittedAgain(t *testing.T) {
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	races := 0
	raceSpans(t, s, other, func() bool { races++; return races == 1 })
	l := load(t, s, sinktest.DerivedBatch(0, 9, 1))
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 20 {
		t.Errorf("loaded %+v, want the 20 span rows", l.Ranges)
	}
	if ops := operations(t, s); len(ops) != 10 {
		t.Errorf("%d operations, want 10", len(ops))
	}
	pos, err := s.FurthestPositions(context.Background(), []sink.TopicPartition{{Topic: "traces"}})
	if err != nil {
		t.Fatal(err)
	}
	if main, err := s.Positions(context.Background(), []sink.TopicPartition{{Topic: "traces"}}); err != nil || !maps.Equal(main, pos) {
		t.Errorf("the spans' positions %v (%v), the furthest %v: want them equal", main, err, pos)
	}
}

// The OTLP receivers' own sequence (directload) over a load that
// committed its operations but not its spans (its commit lost every race):
// the request is refused for a retry, and the next requests take positions
// past the operations', so their operations are stored. They took the
// spans' positions before, and the operations' fence left them out.
func TestDirectLoadResumesPastEveryTable(t *testing.T) {
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	forward := pastAHalfCommittedLoad(t, s, other)
	for _, name := range []string{"c", "b"} { // another client's, and the retry
		if err := forward(name); err != nil {
			t.Fatal(err)
		}
	}
	ops := operations(t, s)
	for _, want := range []string{"op a 1.000000000000", "op b 1.000000000000", "op c 1.000000000000"} {
		if !slices.Contains(ops, want) {
			t.Errorf("operation %q missing from %v", want, ops)
		}
	}
	// The failed load's position is recorded as abandoned (verify tells
	// it from a lost request), and the spans' position moved past it.
	tp := sink.TopicPartition{Topic: directload.Topic("traces")}
	abandoned, err := s.Abandoned(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []sink.Run{{First: 1, Last: 1}}; !slices.Equal(abandoned[tp], want) {
		t.Errorf("abandoned %v, want %v", abandoned, want)
	}
	if pos, err := s.Positions(context.Background(), []sink.TopicPartition{tp}); err != nil || pos[tp] != 4 {
		t.Errorf("position %v (%v), want 4: a, the abandoned b, c, b again", pos, err)
	}
}

// pastAHalfCommittedLoad starts the OTLP receivers' loading (directload)
// of spanAndOp requests into s, stores request "a", and refuses request
// "b" by making its spans' commit lose every race to other (a second
// instance) after its operations' commit landed; it returns how to send
// the next requests.
func pastAHalfCommittedLoad(t *testing.T, s, other *iceberg.Sink) (forward func(name string) error) {
	t.Helper()
	racing := false
	raceSpans(t, s, other, func() bool { return racing })
	l, err := directload.Start(context.Background(), directload.Options{Sink: s, Decoder: spanAndOp{}, Signal: "traces", MaxLoadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	forward = func(name string) error {
		_, err := l.Forward(context.Background(), "traces", "team-a", []byte(name))
		return err
	}
	if err := forward("a"); err != nil {
		t.Fatal(err)
	}
	racing = true
	if err := forward("b"); err == nil || !iceberg.LostRace(err) {
		t.Fatalf("the request whose spans' commit lost every race: %v, want a lost race", err)
	}
	racing = false
	return forward
}

// spanAndOp decodes a request (its body a name) into one Spans row and
// one Ops row at the request's position.
type spanAndOp struct{}

func (spanAndOp) AppendRows(b *sink.Batch, r *kgo.Record) (int, error) {
	coords := fmt.Sprintf(`"ktopic":%q,"kpartition":%d,"koffset":%d,"kindex":0`, r.Topic, r.Partition, r.Offset)
	b.Rows = fmt.Appendf(b.Rows, `{"name":%q,%s}`+"\n", r.Value, coords)
	b.Derived = fmt.Appendf(b.Derived, `{"name":"op %s","cost":"1",%s}`+"\n", r.Value, coords)
	return 1, nil
}

// A rebuild after a load that committed its operations and not its spans
// (its spans' commit lost every race, the process stopped): the
// operations past the spans' positions stay as loaded, the positions with
// them, and the records read again load their spans without doubling the
// operations.
func TestRebuildKeepsTheOperationsPastTheSpans(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	load(t, s, sinktest.DerivedBatch(0, 9, 1))
	racing := true
	raceSpans(t, s, other, func() bool { return racing })
	f, err := s.Stage(ctx, sinktest.DerivedBatch(10, 19, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err == nil {
		t.Fatal("the load whose spans' commit lost every race landed")
	}
	s.Discard([]sink.File{f}) // the process stops
	racing = false
	tp := []sink.TopicPartition{{Topic: "traces"}}
	if pos, err := s.FurthestPositions(ctx, tp); err != nil || pos[tp[0]] != 20 {
		t.Fatalf("furthest position %v (%v), want the operations' 20", pos, err)
	}
	r, err := s.BeginRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if up := r.UpTo(); up[tp[0]] != 9 {
		t.Fatalf("the rebuild covers %v, want the spans' offsets up to 9", up)
	}
	if n, err := s.ReplaceDerived(ctx, r, [][]byte{opRows(10, 2)}); err != nil || n != 10 {
		t.Fatalf("rebuild: %d rows, %v", n, err)
	}
	if pos, err := s.FurthestPositions(ctx, tp); err != nil || pos[tp[0]] != 20 {
		t.Fatalf("furthest position after the rebuild %v (%v), want the operations' 20 still", pos, err)
	}
	load(t, s, sinktest.DerivedBatch(10, 19, 1)) // read again from Kafka
	if ops := operations(t, s); len(ops) != 20 {
		t.Errorf("%d operations, want 20: %v", len(ops), ops)
	}
}

// A load that commits while a rebuild reads the spans (found by an outside
// review): its operations are not in the rebuilt rows, and the rebuild
// replaced them, losing them. They are past the positions the rebuild
// read, so they stay; the rebuild's commit, which lost its race with the
// load's, is made again over the table as the load left it.
func TestRebuildKeepsALoadThatLandedMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := openDerived(t, t.TempDir())
	load(t, s, sinktest.DerivedBatch(0, 9, 1))
	r, err := s.BeginRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := opRows(10, 2)                     // the operations of the spans read: offsets 0-9
	load(t, s, sinktest.DerivedBatch(10, 19, 1)) // meanwhile
	if n, err := s.ReplaceDerived(ctx, r, [][]byte{rebuilt}); err != nil || n != 10 {
		t.Fatalf("rebuild over a load that landed meanwhile: %d rows, %v", n, err)
	}
	rebuiltAndLoaded(t, operations(t, s))
}

// A load that committed its operations before the rebuild began and its
// spans after the rebuild's commit (two processes, or run beside merge
// --rebuild): the rebuild did not read its spans, and replaced every
// operation, so the load's were lost for good (README listed it as the
// window left). They are past the spans' positions, and stay.
func TestRebuildKeepsOperationsWhoseSpansCommitAfterIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, rebuilder := openDerived(t, dir), openDerived(t, dir)
	load(t, s, sinktest.DerivedBatch(0, 9, 1))
	rebuilt := false
	s.SetBeforeTableCommit(func(table string) {
		if table != "tracelake.spans" || rebuilt {
			return
		}
		rebuilt = true // the load's operations are committed, its spans not yet
		r, err := rebuilder.BeginRebuild(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := rebuilder.ReplaceDerived(ctx, r, [][]byte{opRows(10, 2)}); err != nil || n != 10 {
			t.Fatalf("rebuild: %d rows, %v", n, err)
		}
	})
	load(t, s, sinktest.DerivedBatch(10, 19, 1))
	if !rebuilt {
		t.Fatal("the rebuild did not run between the load's two commits")
	}
	rebuiltAndLoaded(t, operations(t, s))
}

// rebuiltAndLoaded checks ops are the rebuild's operations of offsets 0-9
// (2 dollars) and the load's of 10-19 (1 dollar), each once.
func rebuiltAndLoaded(t *testing.T, ops []string) {
	t.Helper()
	var want []string
	for o := range 20 {
		dollars := 2
		if o >= 10 {
			dollars = 1
		}
		want = append(want, fmt.Sprintf("op %d %d.%012d", o, dollars, o))
	}
	slices.Sort(want)
	if !slices.Equal(ops, want) {
		t.Errorf("operations %v, want %v", ops, want)
	}
}

// A rebuild writes all its files before its one commit, outside any
// snapshot until then: an orphan cleanup meanwhile (`tracelake orphans`,
// judging them older than its grace on a long rebuild) deleted them, and
// the commit referenced files that were gone, a table no scan can read.
// They are leased from when each is written until the commit, as a
// compaction's, by the rebuild's own process (`tracelake merge --rebuild`,
// which stages nothing).
func TestOrphansKeepARebuildsFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	load(t, openDerived(t, dir), sinktest.DerivedBatch(0, 9, 1))
	s := openDerived(t, dir)
	cleaner := openDerived(t, dir)
	r, err := s.BeginRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.SetBeforeRebuildCommit(func() { cleanAllAged(t, cleaner, filepath.Join(dir, "warehouse"), "before the rebuild's commit") })
	n, err := s.ReplaceDerived(ctx, r, [][]byte{opRows(10, 2)})
	s.SetBeforeRebuildCommit(nil)
	if err != nil || n != 10 {
		t.Fatalf("rebuild: %d rows, %v", n, err)
	}
	want := make([]string, 0, 10)
	for o := range 10 {
		want = append(want, fmt.Sprintf("op %d 2.%012d", o, o))
	}
	slices.Sort(want)
	if got := operations(t, s); !slices.Equal(got, want) {
		t.Errorf("operations after the rebuild\n%v\nwant\n%v", got, want)
	}
}

// opRows are the Ops rows of offsets 0..n-1 costing dollars (a rebuild's).
func opRows(n int64, dollars int) []byte {
	var rows []byte
	for o := range n {
		rows = sinktest.OpRow(rows, o, dollars)
	}
	return rows
}
