package iceberg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/tracelake/tracelake/internal/cputime"
	"github.com/tracelake/tracelake/internal/procmem"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// benchSpans are ~1 KB spans: an agent trace's JSON (tracegen) as the
// span's body beside the columns the sort order and lookups use.
var benchSpans = schema.Table{Name: "spans", Tenant: "tenant_id", Columns: []schema.Column{
	{Name: "tenant_id", Type: schema.String}, {Name: "service_name", Type: schema.String},
	{Name: "trace_id", Type: schema.String}, {Name: "span_id", Type: schema.String}, {Name: "body", Type: schema.JSON},
}}

// BenchmarkSortedCompaction compacts one partition of
// TRACELAKE_COMPACT_BENCH_SPANS spans (default 200,000), loaded in
// batches of 10,000 (a file each, 8 spans a trace, trace ids random),
// with a maintenance round at TRACELAKE_COMPACT_BENCH_TARGET bytes
// (default 128 MiB), and reports the round's time, its peak Go heap in
// use (sampled every 10 ms) and the process's peak RSS during the round
// (VmHWM after resetting it), and the files it wrote.
func BenchmarkSortedCompaction(b *testing.B) {
	spans, target := 200_000, int64(128<<20)
	if v, err := strconv.Atoi(os.Getenv("TRACELAKE_COMPACT_BENCH_SPANS")); err == nil {
		spans = v
	}
	if v, err := strconv.ParseInt(os.Getenv("TRACELAKE_COMPACT_BENCH_TARGET"), 10, 64); err == nil {
		target = v
	}
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		s, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
			Namespace: "tracelake", Table: "spans", Typed: &benchSpans})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Prepare(ctx); err != nil {
			b.Fatal(err)
		}
		g, rng := tracegen.New(1), rand.New(rand.NewPCG(1, 2))
		var trace string
		var bodyBytes int64
		for first := 0; first < spans; first += 10_000 {
			bt := &sink.Batch{}
			r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "spans"}, First: int64(first), Last: int64(first)}
			for i := range min(10_000, spans-first) {
				if i%8 == 0 {
					trace = fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
				}
				body := g.Append(nil)
				bodyBytes += int64(len(body))
				row, _ := json.Marshal(map[string]any{"tenant_id": "t1", "service_name": "svc" + strconv.Itoa(rng.IntN(20)), "trace_id": trace,
					"span_id": fmt.Sprintf("%016x", rng.Uint64()), "body": json.RawMessage(body),
					"ktopic": "spans", "kpartition": 0, "koffset": first, "kindex": i})
				bt.Rows = append(append(bt.Rows, row...), '\n')
				r.Records++
			}
			bt.Ranges = []sink.Range{r}
			f, err := s.Stage(ctx, bt)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Load(ctx, []sink.File{f}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		procmem.ResetPeak()
		var peakHeap atomic.Uint64
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap.Load() {
					peakHeap.Store(ms.HeapInuse)
				}
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		b.StartTimer()
		cpu0 := cputime.Process()
		start := time.Now()
		r, err := s.NewMaintainer(iceberg.MaintenanceOptions{TargetFileBytes: target, SmallFiles: 8, ExpireOlderThan: 24 * time.Hour,
			RetainLast: 1, Lease: time.Hour, Now: func() time.Time { return time.Now().Add(72 * time.Hour) }}).Round(ctx)
		took, cpu := time.Since(start), cputime.Process()-cpu0
		b.StopTimer()
		close(done)
		<-sampled
		if err != nil {
			b.Fatal(err)
		}
		files, err := s.DataFiles(ctx, false)
		if err != nil {
			b.Fatal(err)
		}
		var sizes []int64
		var rows int64
		for _, f := range files {
			sizes = append(sizes, f.FileSizeBytes())
			rows += f.Count()
		}
		slices.Sort(sizes)
		if os.Getenv("TRACELAKE_COMPACT_BENCH_COLUMNS") != "" {
			logColumns(b, files[0].FilePath())
		}
		if rows != int64(spans) {
			b.Fatalf("%d rows after compaction, want %d", rows, spans)
		}
		b.Logf("%d spans (%d MB of bodies): %d files of %d bytes into %d: sizes %v; round %.1f s (CPU %.1f s), %.0f spans/s, peak heap in use %d MiB, peak RSS %d MiB",
			spans, bodyBytes>>20, r.Compacted[0].FilesBefore, r.Compacted[0].BytesBefore, len(files), sizes,
			took.Seconds(), cpu.Seconds(), float64(spans)/took.Seconds(), peakHeap.Load()>>20, procmem.Peak()>>20)
		b.ReportMetric(float64(spans)/took.Seconds(), "spans/s")
		b.ReportMetric(float64(peakHeap.Load()>>20), "peak-heap-MiB")
		b.ReportMetric(float64(procmem.Peak()>>20), "peak-RSS-MiB")
		b.ReportMetric(float64(len(files)), "files")
		b.ReportMetric(float64(sizes[len(sizes)-1]>>20), "largest-file-MiB")
		s.Close()
	}
}

// logColumns logs the compressed bytes of each column of a Parquet file,
// and of what is not in a column chunk (footer, bloom filters).
func logColumns(b *testing.B, path string) {
	r, err := file.OpenParquetFile(strings.TrimPrefix(path, "file://"), false)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	cols := map[string]int64{}
	var inChunks int64
	for i := range r.NumRowGroups() {
		rg := r.MetaData().RowGroup(i)
		for c := range rg.NumColumns() {
			cc, _ := rg.ColumnChunk(c)
			cols[cc.PathInSchema().String()] += cc.TotalCompressedSize()
			inChunks += cc.TotalCompressedSize()
		}
	}
	st, _ := os.Stat(strings.TrimPrefix(path, "file://"))
	b.Logf("%d row groups; column bytes %v; outside column chunks %d", r.NumRowGroups(), cols, st.Size()-inChunks)
}
