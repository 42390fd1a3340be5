package duckdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// testOptions are the options of a test's sink in dir: raw table trace_raw.
func testOptions(dir string) Options {
	return Options{Path: filepath.Join(dir, "t.duckdb"), StageDir: filepath.Join(dir, "stage"), Table: "trace_raw"}
}

// openWith opens a sink, closed when the test ends.
func openWith(t testing.TB, opt Options) *Sink {
	t.Helper()
	s, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func open(t *testing.T, dir string) *Sink { return openWith(t, testOptions(dir)) }

// prepared is a prepared sink in a new directory, staging with zstd or not.
func prepared(t *testing.T, zstd bool) *Sink {
	t.Helper()
	opt := testOptions(t.TempDir())
	opt.Zstd = zstd
	s := openWith(t, opt)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// batch encodes offsets [first, last] of partition 0 as raw rows.
func batch(first, last int64) *sink.Batch {
	values := make([]string, last-first+1)
	for i := range values {
		values[i] = `{"o":1}`
	}
	return valuesBatch(first, values...)
}

func count(t *testing.T, s *Sink, q string) int64 {
	t.Helper()
	var n int64
	if err := s.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A load repeated with the same or overlapping offsets (a lost reply, a
// former owner of the partition) inserts only rows past the ledger.
func TestLoadFencedByLedger(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load := func(first, last int64) sink.Loaded {
		t.Helper()
		f, err := s.Stage(ctx, batch(first, last))
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Load(ctx, []sink.File{f})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	load(0, 99)
	if l := load(0, 99); len(l.Ranges) != 0 {
		t.Errorf("repeated load wrote ranges %+v", l.Ranges)
	}
	l := load(50, 149) // overlaps: only 100..149 are new
	if len(l.Ranges) != 1 || l.Ranges[0].First != 100 || l.Ranges[0].Last != 149 || l.Ranges[0].Records != 50 {
		t.Errorf("overlapping load ranges = %+v, want 100..149 with 50 records", l.Ranges)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw`); n != 150 {
		t.Errorf("rows = %d, want 150", n)
	}
	if n := count(t, s, `SELECT count(DISTINCT koffset) FROM trace_raw`); n != 150 {
		t.Errorf("distinct offsets = %d, want 150", n)
	}
	pos, err := s.Positions(ctx, []sink.TopicPartition{{Topic: "t", Partition: 0}})
	if err != nil || pos[sink.TopicPartition{Topic: "t", Partition: 0}] != 150 {
		t.Errorf("positions = %v, %v; want next 150", pos, err)
	}
}

// One load of files that cover the same offsets (a partition back on the
// same worker, read again while its first file was pending) inserts each
// offset once, in raw and in transform mode: the fence is cumulative
// within a load. Before, every file was fenced by the ledger as it was
// before the load, which both passed: offsets 50-99 and 120-149 were
// stored twice.
func TestFenceIsCumulativeWithinALoad(t *testing.T) {
	transformBatch := func(first, last int64) *sink.Batch {
		b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: last, Records: last - first + 1}}}
		for o := first; o <= last; o++ {
			b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "t", Offset: o, Value: fmt.Appendf(nil, `{"id":%d}`, o)}, envelope.ValueText)
		}
		return b
	}
	for _, mode := range []struct {
		name, table, key string
		batch            func(first, last int64) *sink.Batch
	}{
		{"raw", "trace_raw", "koffset", batch},
		{"transform", "spans", "id", transformBatch},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ctx := context.Background()
			opt := testOptions(t.TempDir())
			opt.Table, opt.Transform = mode.table, mode.name == "transform"
			s := openWith(t, opt)
			if opt.Transform {
				if _, err := s.DB().Exec(`CREATE TABLE spans (id BIGINT NOT NULL)`); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			var files []sink.File
			for _, b := range []*sink.Batch{mode.batch(0, 99), mode.batch(50, 149), mode.batch(120, 199)} {
				b.ID = sink.NewBatchID()
				f, err := s.Stage(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			l, err := s.Load(ctx, files)
			if err != nil {
				t.Fatal(err)
			}
			if n := count(t, s, `SELECT count(*) FROM `+mode.table); n != 200 {
				t.Errorf("rows = %d, want 200", n)
			}
			if n := count(t, s, `SELECT count(DISTINCT `+mode.key+`) FROM `+mode.table); n != 200 {
				t.Errorf("distinct offsets = %d, want 200", n)
			}
			next, records := int64(0), int64(0)
			for _, r := range l.Ranges {
				if r.First != next {
					t.Errorf("ledger ranges %+v: one starts at %d, want %d", l.Ranges, r.First, next)
				}
				next, records = r.Last+1, records+r.Records
			}
			if next != 200 || records != 200 {
				t.Errorf("ledger ranges %+v cover up to %d with %d records, want 200 and 200", l.Ranges, next, records)
			}
			if n := count(t, s, `SELECT sum(records) FROM `+mode.table+`_ledger`); n != 200 {
				t.Errorf("ledger counts %d records, want 200", n)
			}
		})
	}
}

// Two stagings of the same offsets (two owners of a partition, or a
// re-read) never share a path, and a file the ledger wholly covers is not
// read at all: it may be gone. Before, both stagings wrote one path, the
// first load removed it, and the second load failed on the missing file.
func TestStagingsOfTheSameOffsetsDoNotShareAFile(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	first, second := batch(0, 49), batch(0, 49)
	first.ID, second.ID = sink.NewBatchID(), sink.NewBatchID()
	f1, err := s.Stage(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := s.Stage(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if f1.RowsPath == f2.RowsPath {
		t.Fatalf("both stagings wrote %s", f1.RowsPath)
	}
	if _, err := s.Load(ctx, []sink.File{f1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f2.RowsPath); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(ctx, []sink.File{f2})
	if err != nil {
		t.Fatalf("load of a file the ledger wholly covers: %v", err)
	}
	if len(l.Ranges) != 0 || count(t, s, `SELECT count(*) FROM trace_raw`) != 50 {
		t.Errorf("second load wrote %+v", l.Ranges)
	}
}

// An existing table with another schema is reported column by column.
func TestSchemaMismatchNamed(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if _, err := s.DB().Exec(`CREATE TABLE trace_raw (uuid VARCHAR, koffset INTEGER, raw_data VARCHAR, record_metadata JSON, add_time TIMESTAMP, extra INT)`); err != nil {
		t.Fatal(err)
	}
	err := s.Prepare(ctx)
	if err == nil {
		t.Fatal("no error for a mismatched table")
	}
	for _, want := range []string{
		"column koffset is INTEGER, want BIGINT",
		"column kpartition is missing (want INTEGER)",
		"column raw_data is VARCHAR, want JSON",
		"column extra (INTEGER) is not expected",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// Staged files are zstd-compressed when asked and load the same rows.
func TestZstdStaging(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, true)
	b := batch(0, 999)
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(f.RowsPath, rawRowsExt+".zst") || f.Bytes >= int64(len(b.Rows)) {
		t.Errorf("staged %s with %d bytes from %d", f.RowsPath, f.Bytes, len(b.Rows))
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw`); n != 1000 {
		t.Errorf("rows = %d", n)
	}
}

// sink.duckdb.memory_limit and threads reach DuckDB.
func TestMemoryLimitAndThreads(t *testing.T) {
	opt := testOptions(t.TempDir())
	opt.MemoryLimit, opt.Threads = 256<<20, 1
	s := openWith(t, opt)
	var mem, threads string
	if err := s.DB().QueryRow(`SELECT current_setting('memory_limit'), current_setting('threads')::VARCHAR`).Scan(&mem, &threads); err != nil {
		t.Fatal(err)
	}
	if mem != "256.0 MiB" || threads != "1" {
		t.Errorf("memory_limit %q, threads %q; want 256.0 MiB and 1", mem, threads)
	}
}

// Errors after which DuckDB has invalidated the database are fatal: the
// pipeline stops rather than retrying against a dead instance.
func TestFatalErrorsClassified(t *testing.T) {
	for msg, fatal := range map[string]bool{
		"FATAL Error: Transaction COMMIT succeeded and is durable, but the autocheckpoint failed": true,
		"FATAL Error: Failed: database has been invalidated because of a previous fatal error":    true,
		"IO Error: Could not read file":                            false,
		`Conversion Error: Malformed JSON at byte 0 of input: ...`: false,
	} {
		if got := isFatal(errors.New(msg)); got != fatal {
			t.Errorf("isFatal(%q) = %v", msg, got)
		}
	}
}

// JSONCompression says how the raw table's JSON columns are stored: as
// DuckDB picks by default and with auto (not zstd), zstd with zstd (a
// new file is then in a storage format that has it), uncompressed with
// none. The table reopens with any setting (it is not part of the
// columns' types).
func TestJSONCompression(t *testing.T) {
	for _, c := range []struct {
		setting JSONCompression
		want    func(string) bool
	}{
		{"", func(comp string) bool { return comp != "ZSTD" && comp != "Uncompressed" }},
		{JSONAuto, func(comp string) bool { return comp != "ZSTD" && comp != "Uncompressed" }},
		{JSONZstd, func(comp string) bool { return comp == "ZSTD" }},
		{JSONNone, func(comp string) bool { return comp == "Uncompressed" }},
	} {
		opt := testOptions(t.TempDir())
		opt.JSONCompression = c.setting
		s := openWith(t, opt)
		got := loadedJSONStorage(t, s)
		for col, comp := range got {
			if !c.want(comp) {
				t.Errorf("json_compression %q: %s stored %s", c.setting, col, comp)
			}
		}
		t.Logf("json_compression %q: %v", c.setting, got)
		s.Close()
		for _, other := range []JSONCompression{JSONZstd, JSONAuto, JSONNone} {
			opt.JSONCompression = other
			s := openWith(t, opt)
			if err := s.Prepare(context.Background()); err != nil {
				t.Errorf("reopen with %q: %v", other, err)
			}
			s.Close()
		}
	}
}

// zstd is for the raw table alone: the declared tables' JSON columns (the
// OpenTelemetry tables' attributes, read by trace id) keep DuckDB's pick
// unless json_compression is none.
func TestJSONCompressionOfDeclaredTables(t *testing.T) {
	for setting, want := range map[JSONCompression]string{"": "", JSONZstd: "", JSONAuto: "", JSONNone: " USING COMPRESSION uncompressed"} {
		opt := testOptions(t.TempDir())
		opt.Table, opt.Typed, opt.JSONCompression = "otel_spans", &otel.Spans, setting
		opt.Derived, opt.DerivedTable = &genai.Table, "genai_operations"
		s := openWith(t, opt)
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"otel_spans", "genai_operations"} {
			if got := s.jsonStorage(table); got != want {
				t.Errorf("json_compression %q, %s: %q, want %q", setting, table, got, want)
			}
		}
		s.Close()
	}
}

// A database file created in DuckDB's older storage format (DuckDB's
// default, as tracelake creates them unless json_compression is zstd) has
// no zstd for strings, and a
// column created there with USING COMPRESSION zstd would be stored
// uncompressed: a raw table created in such a file is compressed as
// DuckDB picks instead.
func TestJSONCompressionInAnOlderFile(t *testing.T) {
	opt := testOptions(t.TempDir())
	opt.JSONCompression = JSONZstd
	olderFormatFile(t, opt.Path, "CREATE TABLE other (x INTEGER)")
	s := openWith(t, opt)
	if ok, version, err := zstdStorage(context.Background(), s.DB()); err != nil || ok {
		t.Fatalf("file created in DuckDB's default format: zstd %v, format %q (%v)", ok, version, err)
	}
	for col, comp := range loadedJSONStorage(t, s) {
		if comp == "Uncompressed" || comp == "ZSTD" {
			t.Errorf("%s stored %s in a file of the older format, want DuckDB's pick", col, comp)
		}
	}
}

// loadedJSONStorage prepares s, loads a batch and checkpoints, and
// returns how the raw table's two JSON columns are stored (their
// segments' compression other than Constant).
func loadedJSONStorage(t *testing.T, s *Sink) map[string]string {
	t.Helper()
	ctx := context.Background()
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := s.Stage(ctx, batch(0, 9999))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec("CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	rows, err := s.DB().Query(`SELECT DISTINCT column_name, compression FROM pragma_storage_info('trace_raw')
		WHERE column_name IN ('raw_data', 'record_metadata') AND segment_type = 'JSON' AND compression <> 'Constant' ORDER BY ALL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var col, comp string
		if err := rows.Scan(&col, &comp); err != nil {
			t.Fatal(err)
		}
		if had, ok := got[col]; ok {
			t.Errorf("%s stored both %s and %s", col, had, comp)
		}
		got[col] = comp
	}
	if err := rows.Err(); err != nil || len(got) != 2 {
		t.Fatalf("storage info %v (%v); want both JSON columns", got, err)
	}
	return got
}

// The sink is a sink.RowsReleaser: once Stage returns it holds nothing of
// the batch's rows, so the pipeline may write the next batch over them.
// Scribbled over after staging, plain and zstd, the load still stores
// every row as it was.
func TestStageKeepsNoRows(t *testing.T) {
	ctx := context.Background()
	var _ sink.RowsReleaser = (*Sink)(nil)
	for _, zstd := range []bool{false, true} {
		s := prepared(t, zstd)
		b := batch(0, 999)
		f, err := s.Stage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Rows {
			b.Rows[i] = 'x'
		}
		if _, err := s.Load(ctx, []sink.File{f}); err != nil {
			t.Fatalf("zstd %v: %v", zstd, err)
		}
		if n := count(t, s, `SELECT count(*) FROM trace_raw WHERE raw_data::VARCHAR = '{"o":1}'`); n != 1000 {
			t.Errorf("zstd %v: %d rows as produced, want 1000", zstd, n)
		}
	}
}

// A load says when only its commit is left: every staged file has been
// read (they can be gone by then) and no row is visible yet; once it
// returns, every row is.
func TestLoadReportsCommitting(t *testing.T) {
	s := prepared(t, false)
	ctx := context.Background()
	var files []sink.File
	for _, b := range []*sink.Batch{batch(0, 99), batch(100, 199)} {
		f, err := s.Stage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	calls, visible := 0, int64(-1)
	loaded, err := s.LoadReporting(ctx, files, func() {
		calls++
		visible = count(t, s, "SELECT count(*) FROM trace_raw")
		for _, f := range files {
			if err := os.Remove(f.RowsPath); err != nil {
				t.Errorf("remove a file the load read: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("committing called %d times, want once", calls)
	}
	if visible != 0 {
		t.Errorf("%d rows visible when committing was called, want 0 (called after the commit)", visible)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 200 {
		t.Errorf("loaded %+v, want 200 records of one partition", loaded.Ranges)
	}
	if n := count(t, s, "SELECT count(*) FROM trace_raw"); n != 200 {
		t.Errorf("%d rows after the load, want 200", n)
	}
}

// walBytes is the size of s's write-ahead log, 0 when there is none.
func walBytes(t *testing.T, s *Sink) int64 {
	t.Helper()
	st, err := os.Stat(s.opt.Path + ".wal")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// mustLoad stages bs and loads them in one load.
func mustLoad(t *testing.T, s *Sink, bs ...*sink.Batch) {
	t.Helper()
	if _, err := s.Load(context.Background(), stage(t, s, bs...)); err != nil {
		t.Fatal(err)
	}
}

// A load of the default size checkpoints in its own commit, so its rows
// are written to the database file once, not to the write-ahead log
// first; a small load gathers in the log (see checkpointThreshold).
func TestFullLoadsCheckpointInTheirCommit(t *testing.T) {
	s := prepared(t, false)
	mustLoad(t, s, batch(0, 9))
	if walBytes(t, s) == 0 {
		t.Fatal("a load of 10 rows left the write-ahead log empty: it should gather there")
	}
	mustLoad(t, s, batch(10, 20_009)) // the rows of a load of the default size (~1 KB messages)
	if n := walBytes(t, s); n != 0 {
		t.Errorf("after a load of 20,000 rows the write-ahead log holds %d bytes, want none (checkpointed in the commit)", n)
	}
	if got := count(t, s, `SELECT count(*) FROM trace_raw`); got != 20_010 {
		t.Errorf("%d rows, want 20,010", got)
	}
}

// Files a killed process staged (raw rows, their zstd form, NDJSON rows
// and dead letters) are removed when the sink is prepared again; other
// files in the stage directory are left alone.
func TestPrepareRemovesStaleStagedFiles(t *testing.T) {
	opt := testOptions(t.TempDir())
	if err := os.MkdirAll(opt.StageDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := []string{"t-0-0-9-n1-a.rows", "t-0-10-19-n1-b.rows.zst", "t-0-20-29-n1-c.ndjson", "t-0-20-29-n1-c.dlq.ndjson.zst"}
	for _, name := range append(stale, "notes.txt") {
		if err := os.WriteFile(filepath.Join(opt.StageDir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logged bytes.Buffer
	opt.Log = slog.New(slog.NewTextHandler(&logged, nil))
	s := openWith(t, opt)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("files=%d", len(stale)); !strings.Contains(logged.String(), want) {
		t.Errorf("log %q does not say %s", logged.String(), want)
	}
	entries, err := os.ReadDir(opt.StageDir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) != 1 || left[0] != "notes.txt" {
		t.Errorf("stage directory holds %v, want only notes.txt", left)
	}
}

// No statement on the sink's database installs or loads an extension: a
// type or function of one not built in is an error, and DuckDB writes
// nothing under $HOME/.duckdb (where it would download it to).
func TestNoExtensionIsInstalledOrLoaded(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	s := openWith(t, testOptions(t.TempDir()))
	if _, err := s.DB().Exec(`SELECT NULL::INET`); err == nil {
		t.Fatal("a type of an extension not built in was found")
	}
	if _, err := os.Stat(filepath.Join(home, ".duckdb")); err == nil {
		t.Errorf("DuckDB wrote %s: it tried to install an extension", filepath.Join(home, ".duckdb"))
	}
}

// A load whose commit reported an error may have landed all the same
// (DuckDB invalidates the database after some such commits, but says the
// commit is durable): its partitions' positions are read from the ledger
// again by the next load, not taken from what this process cached, so a
// retry of the same files fences what landed. Here the failed load's rows
// and ledger row are written by hand, as a commit that landed would have.
func TestLoadAfterAFailedCommitReadsTheLedgerAgain(t *testing.T) {
	s := prepared(t, false)
	mustLoad(t, s, batch(0, 99))
	files := stage(t, s, batch(100, 199))
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := s.LoadReporting(ctx, files, cancel); err == nil {
		t.Fatal("the load committed; the test needs its commit to fail")
	}
	for _, q := range []string{
		`INSERT INTO trace_raw SELECT * REPLACE (koffset + 100 AS koffset) FROM trace_raw WHERE koffset < 100`,
		`INSERT INTO trace_raw_ledger SELECT * REPLACE (100 AS first_offset, 199 AS last_offset) FROM trace_raw_ledger`,
	} {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := s.Load(context.Background(), stage(t, s, batch(100, 199)))
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 0 {
		t.Errorf("the retry loaded %+v, want nothing (the ledger covers it)", loaded.Ranges)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw`); n != 200 {
		t.Errorf("%d rows, want 200 (offsets 100-199 once)", n)
	}
}
