package tempo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// icebergBenchVersion names the layout of the cached warehouses (the
// generator of insertBenchSpans, the batch size, the maintenance round):
// change it when any of them changes, and the next run builds them anew.
const icebergBenchVersion = 1

// icebergBenchBatch is how many spans one staged batch holds: the
// pipeline's batch.max_records, so that the table has the files real
// loads make (one per tenant and batch).
const icebergBenchBatch = 10_000

// icebergBenchLoad is how many staged batches one load commits.
const icebergBenchLoad = 10

// BenchmarkIcebergTraceByID: BenchmarkTraceByID's requests (tenant a's
// traces, with Grafana's window and without) over the same spans in
// Iceberg, read as `tracelake serve` reads them (query.NewIceberg over a
// SQLite catalog and a local warehouse): "loaded" as the loads leave the
// table (a file per tenant for each batch of 10,000 spans), "compacted"
// after a maintenance round (sorted compaction). Reports p50 and p99, the
// CPU time per request (every thread's: DuckDB's, the scan's) and the
// data files and rows the scans opened per request.
//
// The warehouses take minutes to build (17 at 10M spans on 2 shared
// cores, and ~14 GB of memory to sort a tenant's 5M spans): they are
// kept under the user's cache directory, by icebergBenchVersion and span
// count (TEMPO_BENCH_SPANS), and built only when missing.
func BenchmarkIcebergTraceByID(b *testing.B) {
	n := benchSpans()
	dirs := icebergBenchLakes(b, n)
	for _, layout := range []string{"loaded", "compacted"} {
		var mu sync.Mutex
		var files, rows int64
		r := openBenchReader(b, dirs[layout], func(st query.ScanStats) {
			mu.Lock()
			files, rows = files+int64(st.Files), rows+st.Rows
			mu.Unlock()
		})
		mux := readerMux(b, r)
		for _, window := range []bool{true, false} {
			name := layout + "/window"
			if !window {
				name = layout + "/nowindow"
			}
			b.Run(name, func(b *testing.B) {
				mu.Lock()
				files, rows = 0, 0
				mu.Unlock()
				cpu := cpuTime()
				traceByIDLoop(b, mux, n, window)
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
				mu.Lock()
				b.ReportMetric(float64(files)/float64(b.N), "files/op")
				b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
				mu.Unlock()
			})
		}
	}
}

// cpuTime is the process's CPU time so far, every thread's: on a machine
// shared with other work, wall time swells with the load, CPU time less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openBenchReader opens the Iceberg reader of the spans table in dir, as
// `tracelake serve` declares it, telling onScan of each scan.
func openBenchReader(b testing.TB, dir string, onScan func(query.ScanStats)) *query.Iceberg {
	b.Helper()
	snk := openBenchSink(b, dir)
	r, err := query.NewIceberg(context.Background(), snk.Catalog(),
		[]query.IcebergTable{{Name: "otel_spans", ID: table.Identifier{"tracelake", "otel_spans"}, Columns: duckdbsink.SinkColumns(duckdbsink.TypedColumns(&otel.Spans))}},
		query.IcebergOptions{OnScan: onScan})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

// openBenchSink opens (creating if need be) the spans table of the
// warehouse in dir.
func openBenchSink(b testing.TB, dir string) *iceberg.Sink {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	snk, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: "otel_spans", Typed: &otel.Spans})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { snk.Close() })
	if err := snk.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	return snk
}

// icebergBenchLakes returns the directories of the two warehouses of n
// bench spans, "loaded" and "compacted", building them if the cache has
// not got them.
func icebergBenchLakes(b *testing.B, n int) map[string]string {
	b.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(cache, "tracelake-bench", fmt.Sprintf("tempo-iceberg-v%d-%d", icebergBenchVersion, n))
	dirs := map[string]string{"loaded": filepath.Join(root, "loaded"), "compacted": filepath.Join(root, "compacted")}
	done := filepath.Join(root, "done")
	if _, err := os.Stat(done); err == nil {
		return dirs
	}
	// A build cut short leaves a partial warehouse: start over.
	if err := os.RemoveAll(root); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	buildIcebergBenchLakes(b, n, dirs["loaded"], dirs["compacted"])
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("built the Iceberg warehouses of %d spans in %s (kept in %s)", n, time.Since(began).Round(time.Second), root)
	return dirs
}

// buildIcebergBenchLakes loads the bench spans into the warehouses in
// both dirs as the pipeline loads them (batches of icebergBenchBatch
// spans in time order, icebergBenchLoad batches a load, offsets of one
// Kafka partition), then runs a maintenance round on the second one the
// day after the spans' day, as sink.iceberg.maintenance runs it with its
// defaults.
func buildIcebergBenchLakes(b *testing.B, n int, loaded, compacted string) {
	b.Helper()
	ctx := context.Background()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	insertBenchSpans(b, db, n)
	sinks := []*iceberg.Sink{openBenchSink(b, loaded), openBenchSink(b, compacted)}
	icebergtest.LoadTable(b, db, "otel_spans", &otel.Spans, n, icebergBenchBatch, icebergBenchLoad, sinks...)
	dayAfter := benchStart.Add(48 * time.Hour)
	round, err := sinks[1].NewMaintainer(iceberg.MaintenanceOptions{TargetFileBytes: 128 << 20, SmallFiles: 32,
		ExpireOlderThan: 24 * time.Hour, RetainLast: 1, Lease: time.Minute, Now: func() time.Time { return dayAfter }}).Round(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range round.Compacted {
		b.Logf("compacted %s: %d files (%d bytes) into %d (%d bytes)", c.Table, c.FilesBefore, c.BytesBefore, c.FilesAfter, c.BytesAfter)
	}
}
