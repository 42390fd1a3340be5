package iceberg_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// writeFaults makes writes to chosen data files of the local warehouse
// fail, as a store that fails a writer's upload.
type writeFaults struct {
	mu      sync.Mutex
	created []string        // the Parquet files created, in order
	doomed  map[string]bool // files whose writes fail from now on
	doomNew bool            // files created now are doomed from the start
	given   int             // doomed files closed (given up)
	// held, if set, holds up the closing of every Parquet file until it
	// is closed; closing counts the closings held up.
	held    chan struct{}
	closing int
}

// holdCloses holds up the closing of every Parquet file from now on,
// until the function returned is called.
func (f *writeFaults) holdCloses() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = make(chan struct{})
	return sync.OnceFunc(func() { close(f.held) })
}

// closingHeld is how many closings are held up.
func (f *writeFaults) closingHeld() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closing
}

// injectWriteFaults makes the local warehouse's file system go through
// the faults returned, for the rest of the test.
func injectWriteFaults(t *testing.T) *writeFaults {
	f := &writeFaults{doomed: map[string]bool{}}
	useLocalFS(t, faultyFS{f: f})
	return f
}

// createdFiles is how many Parquet files were created so far.
func (f *writeFaults) createdFiles() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.created)
}

// doomCreated makes every write to the Parquet files created from now on
// fail, as long as on holds.
func (f *writeFaults) doomCreated(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.doomNew = on
}

// givenUp is how many doomed files were closed.
func (f *writeFaults) givenUp() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.given
}

// doom makes every write to the Parquet files created so far fail.
func (f *writeFaults) doom() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.created {
		f.doomed[p] = true
	}
}

func (f *writeFaults) fails(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.doomed[path]
}

var errInjected = errors.New("injected write failure")

type faultyFS struct {
	icebergio.LocalFS
	f *writeFaults
}

func (fs faultyFS) Create(path string) (icebergio.FileWriter, error) {
	w, err := fs.LocalFS.Create(path)
	if err != nil || !strings.HasSuffix(path, ".parquet") {
		return w, err
	}
	fs.f.mu.Lock()
	fs.f.created = append(fs.f.created, path)
	if fs.f.doomNew {
		fs.f.doomed[path] = true
	}
	fs.f.mu.Unlock()
	return faultyWriter{w, path, fs.f}, nil
}

type faultyWriter struct {
	icebergio.FileWriter
	path string
	f    *writeFaults
}

func (w faultyWriter) Write(p []byte) (int, error) {
	if w.f.fails(w.path) {
		return 0, errInjected
	}
	return w.FileWriter.Write(p)
}

func (w faultyWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.f.fails(w.path) {
		return 0, errInjected
	}
	return w.FileWriter.ReadFrom(r)
}

func (w faultyWriter) Close() error {
	w.f.mu.Lock()
	held := w.f.held
	if held != nil {
		w.f.closing++
	}
	w.f.mu.Unlock()
	if held != nil {
		<-held
	}
	err := w.FileWriter.Close()
	if w.f.fails(w.path) {
		w.f.mu.Lock()
		w.f.given++
		w.f.mu.Unlock()
		return errInjected
	}
	return err
}

// An entry closed before its load because the next batch read a
// partition again finishes its files then: a file whose writing fails
// there has lost the rows of the batches written into it, and their load
// must fail (sink.ErrFatal: they are read again from Kafka). It committed
// the entry without the file, the positions past the lost rows.
func TestWriteErrorOfAnEntryClosedByAReReadFailsItsLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	faults := injectWriteFaults(t)
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	files := stage(t, s, "w", batch(0, 0, 9))
	waitUntil(t, func() bool { return faults.createdFiles() == 1 }) // the raw file: written asynchronously
	faults.doom()
	files = append(files, stage(t, s, "w", batch(0, 5, 14))...) // read again: closes the first entry
	_, err := s.Load(ctx, files)
	if err == nil {
		t.Fatalf("the load of an entry whose file failed succeeded: raw offsets %v, want 0-14 or a failed load", stored(t, s, false))
	}
	if !errors.Is(err, sink.ErrFatal) {
		t.Errorf("load: %v, want sink.ErrFatal", err)
	}
	s.Discard(files)
	wantAllReferenced(t, s, dir, "after the failed load's Discard")
}

// A batch whose write fails leaves the stream's entry failed: the next
// batch of the stream starts a new entry, closing the failed one, and the
// load of the batches written before the failure must still fail. The
// closing dropped the entry's error, and the load committed the entry
// without its file: the rows of the batches before the failure lost, the
// positions past them.
func TestFailedEntryClosedByTheNextBatchFailsItsLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	faults := injectWriteFaults(t)
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	s.HoldUpTo(1, 1) // a big batch finishes the stream's file while it is staged
	before := stage(t, s, "w", batch(0, 0, 9))
	waitUntil(t, func() bool { return faults.createdFiles() == 1 })
	faults.doom()
	big := batch(0, 10, 30009)
	big.Stream = "w"
	if _, err := s.Stage(ctx, big); !errors.Is(err, sink.ErrFatal) {
		t.Fatalf("stage of a batch whose file fails: %v, want sink.ErrFatal", err)
	}
	// The worker stages on (its poll loop had sent the next batch) while
	// it loads what was staged before the failed batch.
	after := stage(t, s, "w", batch(0, 30010, 30019))
	if _, err := s.Load(ctx, before); err == nil {
		t.Fatalf("the load of the batch written before the failed write succeeded: raw offsets %v, position %d",
			len(stored(t, s, false)[0]), position(t, s, 0))
	} else if !errors.Is(err, sink.ErrFatal) {
		t.Errorf("load: %v, want sink.ErrFatal", err)
	}
	s.Discard(before)
	s.Discard(after)
	wantAllReferenced(t, s, dir, "after the Discards")
}

// A writer whose file fails between two batches (an upload that fails as
// a row group is flushed) has lost the rows given to it: iceberg-go's
// partitioned writer drops the failed file's writer, and with it its
// error, when the failure comes before the next rows of its partition,
// which then go into a new file. The load of the batches must fail
// (sink.ErrFatal). It committed the new file alone, the positions past
// the rows lost.
func TestRowsOfAWriterThatFailedBetweenBatchesFailTheLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	faults := injectWriteFaults(t)
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	faults.doomCreated(true)
	files := stage(t, s, "w", batch(0, 0, 9))
	// The writer failed and gave up its file.
	waitUntil(t, func() bool { return faults.givenUp() == 1 })
	faults.doomCreated(false)
	files = append(files, stage(t, s, "w", batch(0, 10, 19))...)
	_, err := s.Load(ctx, files)
	if err == nil {
		t.Fatalf("the load of rows a failed writer lost succeeded: raw offsets %v, position %d", stored(t, s, false), position(t, s, 0))
	}
	if !errors.Is(err, sink.ErrFatal) {
		t.Errorf("load: %v, want sink.ErrFatal", err)
	}
	s.Discard(files)
	wantAllReferenced(t, s, dir, "after the failed load's Discard")
}

// position is the raw table's position of partition p of topic traces.
func position(t *testing.T, s *iceberg.Sink, p int32) int64 {
	t.Helper()
	tp := sink.TopicPartition{Topic: "traces", Partition: p}
	pos, err := s.Positions(context.Background(), []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	return pos[tp]
}

// A batch that fails to stage (its rows cannot be built) is not loaded,
// and the pipeline never loads a batch of the stream read after it: the
// next batch, staged while the worker loads those before the failure,
// must not be committed with them, or the positions pass the failed
// batch's records, which the next run then skips.
func TestBatchAfterAFailedStageIsNotCommittedWithTheOnesBefore(t *testing.T) {
	ctx := context.Background()
	s := openDerived(t, t.TempDir())
	before := stage(t, s, "w", sinktest.DerivedBatch(0, 9, 1))
	failing := sinktest.DerivedBatch(10, 19, 1)
	failing.Rows = append(bytes.Clone(failing.Rows), "{\n"...) // a row that is not JSON
	failing.Stream = "w"
	if _, err := s.Stage(ctx, failing); err == nil {
		t.Fatal("a batch with a malformed row was staged")
	}
	stage(t, s, "w", sinktest.DerivedBatch(20, 29, 1))
	if _, err := s.Load(ctx, before); err != nil {
		t.Fatal(err)
	}
	if next := position(t, s, 0); next != 10 {
		t.Errorf("position %d after the load of offsets 0-9, want 10: the failed batch's offsets 10-19 are skipped", next)
	}
}

// A load whose batches were all committed with the load before (staged
// while it began) commits nothing, and its batches are forgotten: the
// sink kept them for good, one per such load (a worker of a quiet topic
// makes one every load interval).
func TestLoadOfBatchesCommittedEarlyForgetsThem(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw"})
	for i := range int64(3) {
		files := stage(t, s, "w", batch(0, i*20, i*20+9), batch(0, i*20+10, i*20+19))
		if _, err := s.Load(ctx, files[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, files[1:]); err != nil {
			t.Fatal(err)
		}
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 59)) {
		t.Errorf("raw offsets %v", got)
	}
	if n := s.CommittedEarly(); n != 0 {
		t.Errorf("%d batches still remembered as committed early after their own loads", n)
	}
}

// Workers stage their next batches while their loads (shared in group
// commits) run, as the pipeline does: every row is committed once, the
// positions end past the last batch, no file is left behind and nothing
// stays remembered.
func TestStreamsStageWhileTheirLoadsCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw", GroupWait: 5 * time.Millisecond})
	const streams, batches, size = 3, 40, 10
	var wg sync.WaitGroup
	for w := range int32(streams) {
		files := make(chan sink.File, batches)
		wg.Go(func() {
			defer close(files)
			for i := range int64(batches) {
				b := batch(w, i*size, i*size+size-1, i*size+3)
				b.Stream = fmt.Sprint("worker-", w)
				f, err := s.Stage(ctx, b)
				if err != nil {
					t.Error(err)
					return
				}
				files <- f
			}
		})
		wg.Go(func() {
			var pending []sink.File
			load := func() {
				if len(pending) == 0 {
					return
				}
				if _, err := s.Load(ctx, pending); err != nil {
					t.Error(err)
				}
				pending = nil
			}
			for {
				select {
				case f, ok := <-files:
					if !ok {
						load()
						return
					}
					pending = append(pending, f)
				case <-time.After(time.Millisecond):
					load()
				}
			}
		})
	}
	wg.Wait()
	raw, dlq := stored(t, s, false), stored(t, s, true)
	for w := range int32(streams) {
		var bad []int64
		for i := range int64(batches) {
			bad = append(bad, i*size+3)
		}
		if !slices.Equal(raw[w], seq(0, batches*size-1, bad...)) || !slices.Equal(dlq[w], bad) {
			t.Errorf("partition %d: raw offsets %v, dead letters %v", w, raw[w], dlq[w])
		}
		if next := position(t, s, w); next != batches*size {
			t.Errorf("partition %d: position %d, want %d", w, next, batches*size)
		}
	}
	wantAllReferenced(t, s, dir, "unreferenced")
	if n := s.CommittedEarly(); n != 0 {
		t.Errorf("%d batches still remembered as committed early after their own loads", n)
	}
}

// A partition that moved while a stream's entry waited for its load (its
// new owner committed part of it) has the entry's files written again
// without the rows the positions cover, a read batch of rows at a time.
// The refence read every file of the entry into memory before writing:
// with load-sized entries, a worker's load interval of rows at once,
// where it was one batch's before.
func TestRefenceOfALoadSizedEntryHoldsABatchOfRowsAtATime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	if err := s.SetTableProperty(ctx, "write.target-file-size-bytes", "65536"); err != nil {
		t.Fatal(err)
	}
	const batches, size = 300, 100
	all := []*sink.Batch{batch(0, 0, 9, 3)}
	for i := range int64(batches) {
		all = append(all, batch(1, i*size, i*size+size-1, i*size+7))
	}
	files := stage(t, s, "w", all...)
	// Partition 0 moved to another process, which committed part of it.
	other := openSink(t, dir, false)
	load(t, other, batch(0, 0, 4, 3))
	l, err := s.Load(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	var bad []int64
	for i := range int64(batches) {
		bad = append(bad, i*size+7)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 9, 3)) || !slices.Equal(got[1], seq(0, batches*size-1, bad...)) {
		t.Errorf("raw offsets: partition 0 %v, partition 1 %d rows", got[0], len(got[1]))
	}
	if got := stored(t, s, true); !slices.Equal(got[0], []int64{3}) || !slices.Equal(got[1], bad) {
		t.Errorf("dead-letter offsets %v", got)
	}
	if len(l.Ranges) != 2 || l.Ranges[0].Records != 5 || l.Ranges[1].Records != batches*(size-1) {
		t.Errorf("loaded %+v, want partition 0's 5 rows past the other owner's and all of partition 1", l.Ranges)
	}
	if peak, rows := iceberg.PeakRefenceRows(), int64(batches*(size-1)); peak > rows/4 {
		t.Errorf("the refence held %d of the entry's %d rows at once, want a read batch's", peak, rows)
	}
}

// A Discard of a stream's batches while its next batch is being written
// into the same files (the contract lets a stream stage while it loads
// or discards) leaves that batch not staged: its stage fails, or its load
// does. It stayed
// kept, its files deleted with the entry, and its load committed nothing
// with the positions past it and past the discarded batches.
func TestBatchStagedWhileItsEntryIsDiscardedIsNotLoadedEmpty(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	faults := injectWriteFaults(t)
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	s.HoldUpTo(1, 1) // a big batch finishes the stream's file while it is staged
	discarded := stage(t, s, "w", batch(0, 0, 9))
	release := faults.holdCloses()
	defer release()
	big := batch(0, 10, 30009)
	big.Stream = "w"
	staged := make(chan error, 1)
	var f sink.File
	go func() {
		var err error
		f, err = s.Stage(ctx, big)
		staged <- err
	}()
	waitUntil(t, func() bool { return faults.closingHeld() == 1 }) // the big batch is being written
	done := make(chan struct{})
	go func() {
		s.Discard(discarded)
		close(done)
	}()
	waitUntil(t, func() bool { return s.KeptBatches() == 0 }) // the Discard took the entry's batches
	release()
	// The Discard stops the entry's writers: the batch's stage fails
	// (sink.ErrFatal), or it was written before, and its load fails.
	err := <-staged
	<-done
	switch {
	case err != nil && !errors.Is(err, sink.ErrFatal):
		t.Errorf("stage of the batch written while its entry was discarded: %v, want sink.ErrFatal", err)
	case err == nil:
		if _, err := s.Load(ctx, []sink.File{f}); err == nil {
			t.Errorf("the load of a batch whose files a Discard deleted succeeded: raw offsets %v, position %d", stored(t, s, false), position(t, s, 0))
		}
	}
	wantAllReferenced(t, s, dir, "after the Discard")
}

// A stream's batches of a declared table partitioned by tenant and day
// go into a writer per partition, which finishes its file early when the
// stream's writers hold too much (and a new one takes the partition's next
// rows): every span lands once, in a file of its own partition.
func TestTypedStreamWritesEachTenantAndDayOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTyped(t, dir, &otel.Spans)
	s.HoldUpTo(1, 1) // the writers finish files early
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	days := []time.Time{time.Date(2026, 11, 29, 23, 59, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 1, 0, 0, time.UTC)}
	tenants := []string{"a", "b", "c"}
	want := map[string]int{}
	var batches []*sink.Batch
	offset := int64(0)
	for range 12 {
		b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "otlp"}, First: offset}}}
		for range 300 {
			tenant, day := tenants[offset%3], days[offset/3%2]
			rec := &kgo.Record{Topic: "otlp", Offset: offset, Value: spansRequest(t, day, byte(offset), byte(offset+1)),
				Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(tenant)}}}
			n, err := dec.AppendRows(b, rec)
			if err != nil {
				t.Fatal(err)
			}
			b.Ranges[0].Records += int64(n)
			want[tenant+" "+day.Format(time.DateOnly)] += n
			offset++
		}
		b.Ranges[0].Last = offset - 1
		batches = append(batches, b)
	}
	files := stage(t, s, "w", batches...)
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
	m, err := s.Stored(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for tp, offs := range m {
		if union, dups := sink.Coverage(offs); dups != 0 || len(union) != 1 || union[0].First != 0 || union[0].Last != offset-1 {
			t.Errorf("%v: offsets %v, %d rows twice; want 0-%d once", tp, union, dups, offset-1)
		}
	}
	tbl, err := s.Catalog().LoadTable(ctx, table.Identifier{"tracelake", otel.Spans.Name})
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields("tenant_id", "start_time")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		tenant, start := rec.Column(0).(*array.String), rec.Column(1).(*array.Timestamp)
		unit := start.DataType().(*arrow.TimestampType).Unit
		for i := range int(rec.NumRows()) {
			got[tenant.Value(i)+" "+start.Value(i).ToTime(unit).UTC().Format(time.DateOnly)]++
		}
		rec.Release()
	}
	if !maps.Equal(got, want) {
		t.Errorf("spans per tenant and day %v, want %v", got, want)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) <= len(want) {
		t.Errorf("%d files for %d partitions: the writers finished no file early", len(tasks), len(want))
	}
}

// Two workers' streams in one group commit, a partition having moved
// from one to the other while both held it in their open entries (the
// revoke's flush gave up): the commit fences the second entry past the
// first, each row once, the positions past both.
func TestGroupCommitOfTwoStreamsWithAMovedPartition(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw", GroupWait: 200 * time.Millisecond})
	a := stage(t, s, "worker-a", batch(0, 0, 9, 2), batch(1, 0, 9), batch(0, 10, 19))
	b := stage(t, s, "worker-b", batch(0, 0, 14, 2), batch(2, 0, 9), batch(0, 15, 24, 20))
	var wg sync.WaitGroup
	loaded := make([]sink.Loaded, 2)
	for i, files := range [][]sink.File{a, b} {
		wg.Go(func() {
			l, err := s.Load(ctx, files)
			if err != nil {
				t.Error(err)
			}
			loaded[i] = l
		})
	}
	wg.Wait()
	if ops, err := s.Operations(ctx); err != nil || len(ops) != 1 {
		t.Errorf("raw snapshots %v (%v), want one commit for both streams", ops, err)
	}
	raw := stored(t, s, false)
	if !slices.Equal(raw[0], seq(0, 24, 2, 20)) || !slices.Equal(raw[1], seq(0, 9)) || !slices.Equal(raw[2], seq(0, 9)) {
		t.Errorf("raw offsets %v", raw)
	}
	if dlq := stored(t, s, true); !slices.Equal(dlq[0], []int64{2, 20}) {
		t.Errorf("dead-letter offsets %v", dlq)
	}
	for p, want := range map[int32]int64{0: 25, 1: 10, 2: 10} {
		if next := position(t, s, p); next != want {
			t.Errorf("partition %d: position %d, want %d", p, next, want)
		}
	}
	var records int64
	for _, l := range loaded {
		for _, r := range l.Ranges {
			records += r.Records
		}
	}
	if records != 23+10+10 {
		t.Errorf("loads report %d rows, want 43 (%+v)", records, loaded)
	}
	wantAllReferenced(t, s, dir, "unreferenced")
}

// Closed with batches in open writers (their loads never came: the run
// stopped), the sink deletes the writers' files: nothing is left for
// orphan cleanup, and no lease.
func TestCloseDeletesTheOpenFiles(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "warehouse")
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	stage(t, s, "w", batch(0, 0, 9, 3), batch(0, 10, 19))
	stage(t, s, "v", batch(1, 0, 9))
	waitUntil(t, func() bool { return len(unreferenced(t, s, root)) == 3 })
	if err := s.RenewLeases(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := unreferenced(t, openSink(t, dir, false), root); len(left) != 0 {
		t.Errorf("files left after Close: %v", left)
	}
	if leases := leaseFiles(t, root); len(leases) != 0 {
		t.Errorf("leases left after Close: %v", leases)
	}
}

// A batch committed with the load before its own (staged while that one
// began) is reported by its own load: each load reports the rows and
// dead letters of the batches it names, as the pipeline counts them
// (it takes dead letters a load reports beyond its batches' for rows the
// table rejected). The load that committed the batch reported them, and
// its own load none. An entry the positions fenced reports what is left
// of it with the load that committed it.
func TestEachLoadReportsTheRowsOfItsOwnBatches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	report := func(files []sink.File) (rows, dlq int64) {
		t.Helper()
		l, err := s.Load(ctx, files)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.Ranges {
			rows, dlq = rows+r.Records, dlq+r.DLQ
		}
		return rows, dlq
	}
	files := stage(t, s, "w", batch(0, 0, 9), batch(0, 10, 19, 15))
	if rows, dlq := report(files[:1]); rows != 10 || dlq != 0 {
		t.Errorf("the load of offsets 0-9 reports %d rows and %d dead letters, want 10 and none", rows, dlq)
	}
	if rows, dlq := report(files[1:]); rows != 9 || dlq != 1 {
		t.Errorf("the load of offsets 10-19 (committed with the one before) reports %d rows and %d dead letters, want 9 and 1", rows, dlq)
	}
	// Fenced: another process committed offsets 20-24 meanwhile.
	files = stage(t, s, "w", batch(0, 20, 29, 22), batch(0, 30, 39, 35))
	load(t, openSink(t, dir, false), batch(0, 20, 24, 22))
	if rows, dlq := report(files[:1]); rows != 14 || dlq != 1 {
		t.Errorf("the load of the fenced entry reports %d rows and %d dead letters, want what is left of it: 14 and 1", rows, dlq)
	}
	if rows, dlq := report(files[1:]); rows != 0 || dlq != 0 {
		t.Errorf("the load of a batch of the fenced entry, committed before, reports %d rows and %d dead letters, want none", rows, dlq)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 39, 15, 22, 35)) {
		t.Errorf("raw offsets %v", got)
	}
}
