package duckdb

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// A table of ~1 MB values grows past DuckDB's memory_limit without a load
// failing: DuckDB's checkpoint used to merge the small row groups of such
// loads into one, holding every string of the merged rows in memory, so
// once the table reached about the limit the automatic checkpoint failed
// and DuckDB invalidated the database ("failed to pin block").
func TestLargeValuesOutgrowTheMemoryLimit(t *testing.T) {
	opt := testOptions(t.TempDir())
	opt.MemoryLimit = 96 << 20
	s := openPrepared(t, opt)
	const loads, perLoad = 24, 6 // ~144 MB: 1.5x the limit
	for load := range loads {
		if err := loadLargeValues(t, s, int64(load*perLoad), perLoad); err != nil {
			t.Fatalf("load %d of %d (table ~%d MB, memory_limit %d MiB): %v", load+1, loads, load*perLoad, opt.MemoryLimit>>20, err)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM trace_raw WHERE length(raw_data::VARCHAR) > 1000000"); n != loads*perLoad {
		t.Fatalf("%d rows of ~1 MB, want %d", n, loads*perLoad)
	}
}

// DuckDB's threads follow memory_limit unless set: each thread reading
// staged files holds a 32 MiB buffer for the whole scan, so one thread per
// core could take the whole limit in read buffers and fail loads. (Whether
// two threads' buffers meet depends on scheduling, so the thread count is
// asserted too; on one core there is one thread either way.)
func TestThreadsFitTheMemoryLimit(t *testing.T) {
	opt := testOptions(t.TempDir())
	opt.MemoryLimit = 64 << 20
	s := openPrepared(t, opt)
	var files []sink.File
	for i := range 8 {
		files = append(files, stageValues(t, s, int64(i*10_000), 10_000, 100))
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM trace_raw"); n != 80_000 {
		t.Fatalf("%d rows, want 80,000", n)
	}
	if loads := count(t, s, "SELECT count(DISTINCT load_id) FROM trace_raw_ledger"); loads != 1 {
		t.Errorf("the files were loaded in %d parts, want one load (it ran out of memory_limit)", loads)
	}
	if threads := count(t, s, "SELECT current_setting('threads')"); threads != 1 {
		t.Errorf("threads %d under a 64 MiB limit, want 1", threads)
	}
}

// Beside a pipeline DuckDB leaves it a core (within memory_limit as
// always); alone it takes them all.
func TestThreadsLeaveThePipelineACore(t *testing.T) {
	cores := int64(runtime.NumCPU())
	for _, c := range []struct {
		beside bool
		limit  int64
		want   int64
	}{{true, 0, max(1, cores-1)}, {true, 1 << 40, max(1, cores-1)}, {false, 1 << 40, cores}, {false, 0, cores}} {
		opt := testOptions(t.TempDir())
		opt.BesidePipeline, opt.MemoryLimit = c.beside, c.limit
		s := openPrepared(t, opt)
		if got := count(t, s, "SELECT current_setting('threads')"); got != c.want {
			t.Errorf("beside a pipeline %v, memory_limit %d: %d threads, want %d", c.beside, c.limit, got, c.want)
		}
	}
}

// A load too big for DuckDB's memory_limit is loaded in halves instead of
// failing again at every retry.
func TestLoadTooBigForTheLimitIsHalved(t *testing.T) {
	opt := testOptions(t.TempDir())
	opt.MemoryLimit = 256 << 20
	s := openPrepared(t, opt)
	loaded, err := s.Load(context.Background(), stageLargeFiles(t, s, 0, 24)) // ~384 MB of values
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "SELECT count(*) FROM trace_raw"); n != 24*16 {
		t.Fatalf("%d rows, want %d", n, 24*16)
	}
	if loads := count(t, s, "SELECT count(DISTINCT load_id) FROM trace_raw_ledger"); loads < 2 || len(loaded.Ranges) != int(loads) {
		t.Errorf("%d loads in the ledger, %d ranges reported: want the files loaded in parts", loads, len(loaded.Ranges))
	}
}

// openPrepared opens a sink with opt and prepares its tables.
func openPrepared(t *testing.T, opt Options) *Sink {
	t.Helper()
	s := openWith(t, opt)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// stageLargeFiles stages files batches of 16 ~1 MB values from offset, as
// the pipeline cuts them (batch.max_bytes 16MiB).
func stageLargeFiles(t *testing.T, s *Sink, offset int64, files int) []sink.File {
	t.Helper()
	var out []sink.File
	for i := range files {
		out = append(out, stageLargeValues(t, s, offset+int64(i*16), 16))
	}
	return out
}

// stageLargeValues stages one batch of n ~1 MB values from offset.
func stageLargeValues(t *testing.T, s *Sink, offset int64, n int) sink.File {
	t.Helper()
	return stageValues(t, s, offset, n, 1_000_000)
}

// stageValues stages one batch of n values of about size bytes from offset.
func stageValues(t *testing.T, s *Sink, offset int64, n, size int) sink.File {
	t.Helper()
	pad := strings.Repeat("x", size)
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf(`{"o":%d,"pad":"%s"}`, offset+int64(i), pad)
	}
	return stage(t, s, valuesBatch(offset, values...))[0]
}

// loadLargeValues loads one batch of n ~1 MB values from offset.
func loadLargeValues(t *testing.T, s *Sink, offset int64, n int) error {
	t.Helper()
	_, err := s.Load(context.Background(), []sink.File{stageLargeValues(t, s, offset, n)})
	return err
}
