package iceberg_test

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// stage stages the batches as one stream's and returns their files.
func stage(t *testing.T, s *iceberg.Sink, stream string, batches ...*sink.Batch) []sink.File {
	t.Helper()
	var files []sink.File
	for _, b := range batches {
		b.Stream = stream
		f, err := s.Stage(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// dataFiles is how many data files the current snapshot of the raw
// (or dead-letter) table references.
func dataFiles(t *testing.T, s *iceberg.Sink, dlq bool) int {
	t.Helper()
	files, err := s.DataFiles(context.Background(), dlq)
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// A worker's batches staged between two loads go into one data file per
// table and partition, not one per batch: at 100 MB/s the batches' files
// were ~80 a second.
func TestStreamBatchesShareLoadSizedFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	var batches []*sink.Batch
	for i := range int64(20) {
		batches = append(batches, batch(0, i*10, i*10+9, i*10+3))
	}
	files := stage(t, s, "worker-1", batches...)
	// The writers create their files as the rows reach them, after Stage
	// returned.
	waitUntil(t, func() bool { return len(unreferenced(t, s, filepath.Join(dir, "warehouse"))) == 2 })
	l, err := s.Load(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	if raw, dlq := dataFiles(t, s, false), dataFiles(t, s, true); raw != 1 || dlq != 1 {
		t.Errorf("%d raw and %d dead-letter data files for 20 batches of one stream, want 1 and 1", raw, dlq)
	}
	var bad []int64
	for i := range int64(20) {
		bad = append(bad, i*10+3)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 199, bad...)) {
		t.Errorf("raw offsets %v", got)
	}
	if got := stored(t, s, true); !slices.Equal(got[0], bad) {
		t.Errorf("dead-letter offsets %v", got)
	}
	if len(l.Ranges) != 1 || l.Ranges[0].First != 0 || l.Ranges[0].Last != 199 || l.Ranges[0].Records != 180 || l.Ranges[0].DLQ != 20 {
		t.Errorf("loaded %+v, want 0-199 with 180 rows and 20 dead letters", l.Ranges)
	}
	// The next batches start new files.
	if _, err := s.Load(ctx, stage(t, s, "worker-1", batch(0, 200, 209))); err != nil {
		t.Fatal(err)
	}
	if raw := dataFiles(t, s, false); raw != 2 {
		t.Errorf("%d raw data files after a second load, want 2", raw)
	}
	wantAllReferenced(t, s, dir, "unreferenced")
}

// A worker stages its next batch while the load of the batches before it
// runs. A batch written into the open files before the load closed them
// is committed with the load (it cannot be taken out of a file), and its
// own load then finds it loaded: every row once, positions past it.
func TestBatchStagedWhileALoadBeginsIsCommittedWithIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	first := stage(t, s, "w", batch(0, 0, 9), batch(0, 10, 19))
	during := stage(t, s, "w", batch(0, 20, 29, 25)) // staged before the load of the first two began
	l, err := s.Load(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	// Each load reports its own batches' rows: the batch committed early
	// is counted by its own load (metrics of rows and dead letters).
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 20 || l.Ranges[0].DLQ != 0 {
		t.Errorf("first load reported %+v, want its 20 rows", l.Ranges)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 29, 25)) {
		t.Errorf("raw offsets after the first load %v, want the batch written with them too", got)
	}
	pos, err := s.Positions(ctx, []sink.TopicPartition{{Topic: "traces", Partition: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if next := pos[sink.TopicPartition{Topic: "traces", Partition: 0}]; next != 30 {
		t.Errorf("position %d after the first load, want 30 (past the batch committed with it)", next)
	}
	// Its own load, with a batch staged after the first load.
	after := stage(t, s, "w", batch(0, 30, 39))
	if l, err = s.Load(ctx, append(during, after...)); err != nil {
		t.Fatal(err)
	}
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 19 || l.Ranges[0].DLQ != 1 || l.Ranges[0].First != 20 || l.Ranges[0].Last != 39 {
		t.Errorf("second load reported %+v, want 20-39 with 19 rows and a dead letter", l.Ranges)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 39, 25)) {
		t.Errorf("raw offsets %v", got)
	}
	if got := stored(t, s, true); !slices.Equal(got[0], []int64{25}) {
		t.Errorf("dead-letter offsets %v", got)
	}
	wantAllReferenced(t, s, dir, "unreferenced")
}

// A partition read again while its batches wait (it came back to the same
// worker) covers offsets the open files hold: written into them, its rows
// would be stored twice, the commit fencing the entry as one range. It
// starts an entry of its own, fenced past the one before.
func TestReReadBatchStartsANewEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	files := stage(t, s, "w", batch(0, 0, 9), batch(1, 0, 9), batch(0, 5, 14), batch(1, 10, 19))
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
	got := stored(t, s, false) // fails on a row stored twice
	if !slices.Equal(got[0], seq(0, 14)) || !slices.Equal(got[1], seq(0, 19)) {
		t.Errorf("raw offsets %v", got)
	}
}

// Discarded, a stream's batches leave no file behind, and the batches
// written with them go too: the worker discards them as well.
func TestDiscardedStreamLeavesNoFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	files := stage(t, s, "w", batch(0, 0, 9, 3), batch(0, 10, 19))
	s.Discard(files[:1])
	wantAllReferenced(t, s, dir, "behind by discarded batches")
	s.Discard(files[1:])
	// The stream goes on in new files.
	if _, err := s.Load(ctx, stage(t, s, "w", batch(0, 0, 9))); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 9)) {
		t.Errorf("raw offsets %v", got)
	}
}

// Files still being written are leased: orphan cleanup, however late it
// judges them, keeps them, and the load commits every row.
func TestOpenFilesAreKeptFromOrphans(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	root := filepath.Join(dir, "warehouse")
	files := stage(t, s, "w", batch(0, 0, 9, 3), batch(0, 10, 19))
	// The writers create their files after Stage returned; a file created
	// after a lease was written is in the next one, written long before
	// orphan cleanup may judge the file (leaseInterval, MinOrphanAge).
	waitUntil(t, func() bool { return len(unreferenced(t, s, root)) == 2 })
	if err := s.RenewLeases(ctx); err != nil {
		t.Fatal(err)
	}
	// Each lease lists its table's file once, not once per batch in it.
	for _, path := range leaseFiles(t, root) {
		var lease struct{ Files []string }
		if data, err := os.ReadFile(path); err != nil || json.Unmarshal(data, &lease) != nil {
			t.Fatalf("lease %s: %v", path, err)
		}
		if len(lease.Files) != 1 {
			t.Errorf("lease %s lists %v, want the table's one open file once", path, lease.Files)
		}
	}
	cleaner := openSink(t, dir, false)
	cleanAllAged(t, cleaner, root, "while the stream's files were open")
	files = append(files, stage(t, s, "w", batch(0, 20, 29))...)
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 29, 3)) {
		t.Errorf("raw offsets %v", got)
	}
}

// Files roll at the table's target size (write.target-file-size-bytes),
// or, where the table sets none, at compaction's (Options.TargetFileBytes,
// so that compaction finds them full): a stream's batches fill files of
// about that size, not one file.
func TestOpenFilesRollAtTheTargetSize(t *testing.T) {
	const target = 64 << 10
	t.Run("table", func(t *testing.T) {
		s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw"})
		if err := s.SetTableProperty(context.Background(), "write.target-file-size-bytes", "65536"); err != nil {
			t.Fatal(err)
		}
		rollsAt(t, s, target)
	})
	t.Run("compaction", func(t *testing.T) {
		rollsAt(t, openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw", TargetFileBytes: target}), target)
	})
}

// rollsAt loads 300 batches of a stream into s and checks that its files
// are of about target bytes.
func rollsAt(t *testing.T, s *iceberg.Sink, target int64) {
	ctx := context.Background()
	var batches []*sink.Batch
	for i := range int64(300) {
		batches = append(batches, batch(0, i*100, i*100+99))
	}
	if _, err := s.Load(ctx, stage(t, s, "w", batches...)); err != nil {
		t.Fatal(err)
	}
	files, err := s.DataFiles(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		total += f.FileSizeBytes()
		if f.FileSizeBytes() > 2*target {
			t.Errorf("a file of %d bytes for a target of %d", f.FileSizeBytes(), target)
		}
	}
	if want := total / target; want < 3 || int64(len(files)) < want || len(files) >= len(batches) {
		t.Errorf("%d files of %d bytes in all for a target of %d bytes and %d batches", len(files), total, target, len(batches))
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 29999)) {
		t.Errorf("raw offsets: %d rows", len(got[0]))
	}
}

// A stream's open writers buffer a row group per partition: rows spread
// over many days (a backlog replayed by event time) would buffer them all
// until the load. Past the stream's share of max_inflight_bytes, the
// writers buffering the most finish their files early; every row still
// lands once.
func TestOpenWritersStayWithinTheirMemory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw", PartitionBy: "$.t"})
	const limit = 1 << 20
	s.HoldUpTo(limit, 1)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var files []sink.File
	for i := range int64(40) {
		b := &sink.Batch{Stream: "w"}
		first := i * 500
		for o := first; o < first+500; o++ {
			// 40 days, each batch touching all of them.
			at := day.AddDate(0, 0, int(o%40))
			rec := &kgo.Record{Topic: "traces", Offset: o, Timestamp: time.Now(),
				Value: fmt.Appendf(nil, `{"t":%q,"pad":%q}`, at.Format(time.RFC3339), strings.Repeat("x", 200))}
			b.Records = append(b.Records, sink.Record{Record: rec, ID: [16]byte{byte(o), byte(o >> 8)}})
		}
		b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: first + 499, Records: 500}}
		f, err := s.Stage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		if held := s.OpenBuffered(); held > limit {
			t.Fatalf("after batch %d the open writers buffer %d bytes, over their %d", i, held, limit)
		}
	}
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 19999)) {
		t.Errorf("raw offsets: %d rows", len(got[0]))
	}
	if n := dataFiles(t, s, false); n <= 40 {
		t.Errorf("%d data files for 40 days: the writers never finished early", n)
	}
}

// A load-sized file on S3 is uploaded in parts (the SDK's multipart upload
// past 8 MiB), where a batch's file of ~1 MiB was one PUT: the parts land
// and the table reads back every row.
func TestS3LoadSizedFilesUploadInParts(t *testing.T) {
	ctx := context.Background()
	s3, reqs := icebergtest.CountRequests(t, icebergtest.StartS3(t, "lake"))
	s := openS3Sink(t, s3)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	var batches []*sink.Batch
	noise := make([]byte, 3000)
	for i := range int64(8) {
		b := &sink.Batch{}
		for o := i * 1000; o < (i+1)*1000; o++ {
			_, _ = crand.Read(noise) // incompressible: the file is as large as the rows
			rec := &kgo.Record{Topic: "traces", Offset: o, Timestamp: time.Now(), Value: fmt.Appendf(nil, `{"n":"%x"}`, noise)}
			b.Records = append(b.Records, sink.Record{Record: rec, ID: [16]byte{byte(o), byte(o >> 8)}})
		}
		b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: i * 1000, Last: i*1000 + 999, Records: 1000}}
		batches = append(batches, b)
	}
	reqs.Take()
	if _, err := s.Load(ctx, stage(t, s, "w", batches...)); err != nil {
		t.Fatal(err)
	}
	puts := reqs.Take()["PUT"]
	files, err := s.DataFiles(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].FileSizeBytes() < 16<<20 {
		t.Fatalf("%d raw data files, want 1 of more than 16 MiB", len(files))
	}
	// A data file of more than two 8 MiB parts: its start, 3 parts, its
	// end; then the manifest, manifest list and metadata.json.
	if puts < 8 {
		t.Errorf("%d PUTs for a data file of %d bytes: not uploaded in parts", puts, files[0].FileSizeBytes())
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 7999)) {
		t.Errorf("raw offsets: %d rows", len(got[0]))
	}
}

// A process that died with a stream's files open leaves them unreferenced:
// once its lease is stale, orphan cleanup deletes them, and the records,
// read again by the process that takes over, land once.
func TestCrashedStreamsFilesGoToOrphans(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "warehouse")
	crashed := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	stage(t, crashed, "w", batch(0, 0, 9, 3), batch(0, 10, 19))
	// The writers create their files as they take the rows.
	waitUntil(t, func() bool { return len(parquetFiles(t, root)) == 2 })
	if err := crashed.RenewLeases(ctx); err != nil {
		t.Fatal(err)
	}
	open := parquetFiles(t, root)
	next := openPrepared(t, dir, iceberg.Options{Table: "trace_raw"})
	// The process is gone: its lease is no longer renewed, its files no
	// longer written. (Here its writers live on in this process and may
	// still be writing a file's first bytes, which makes it young again:
	// the files are aged again until both are deleted.)
	deleted := 0
	deadline := time.Now().Add(10 * time.Second)
	for deleted < 2 && time.Now().Before(deadline) {
		backdate(t, iceberg.LeaseStaleAfter+time.Minute, leaseFiles(t, root)...)
		backdate(t, older, parquetFiles(t, root)...)
		res, err := next.RemoveOrphans(ctx, week, false)
		if err != nil {
			t.Fatal(err)
		}
		deleted += res[0].Deleted + res[1].Deleted
	}
	if deleted != 2 {
		t.Errorf("orphan cleanup deleted %d of the dead process's files %v, want both", deleted, open)
	}
	if _, err := next.Load(ctx, stage(t, next, "w2", batch(0, 0, 9, 3), batch(0, 10, 19))); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, next, false); !slices.Equal(got[0], seq(0, 19, 3)) {
		t.Errorf("raw offsets %v", got)
	}
	if left := unreferenced(t, next, root); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

// With the store hanging, a hard shutdown (Stage's context) ends a stage
// waiting for a stream's writer, with sink.ErrFatal: the batches written
// into the entry are read again. It waited for the store however long.
func TestStageEndsWithItsContextWhileTheStoreHangs(t *testing.T) {
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw"})
	hang := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	hookCreates(t, func(path string) {
		if strings.HasSuffix(path, ".parquet") {
			cancel() // the store hangs, and the process is told to stop now
			<-hang
		}
	})
	t.Cleanup(func() { close(hang) }) // before the sink's Close, which finishes the writers
	ended := make(chan error, 1)
	go func() {
		for i := int64(0); ; i++ {
			b := batch(0, i*10, i*10+9)
			b.Stream = "w"
			if _, err := s.Stage(ctx, b); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if !errors.Is(err, sink.ErrFatal) || !errors.Is(err, context.Canceled) {
			t.Errorf("stage: %v, want sink.ErrFatal for the canceled context", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("stages still waiting for a hung store a minute after their context ended")
	}
}
