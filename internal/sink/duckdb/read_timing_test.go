//go:build duckdb_arrow

package duckdb

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// BenchmarkLoadWhileReading loads spans as BenchmarkLoad does, alone and
// while a client of the read path streams the whole table over and over
// (SELECT * through query.DuckDB, as Flight SQL serves it): the loads'
// rate beside itself in the same run. Each op loads two loads untimed, so
// that the table holds rows to stream, then the rest timed.
func BenchmarkLoadWhileReading(b *testing.B) {
	batches, valueBytes := spanBatches()
	const untimed = 2 * batchesPerLoad
	ctx := context.Background()
	for _, reading := range []bool{false, true} {
		name := map[bool]string{false: "alone", true: "reading"}[reading]
		b.Run(name, func(b *testing.B) {
			var streamed atomic.Int64
			for range b.N {
				b.StopTimer()
				s := openWith(b, testOptions(b.TempDir()))
				if err := s.Prepare(ctx); err != nil {
					b.Fatal(err)
				}
				stageAndLoad(b, s, batches[:untimed], batchesPerLoad)
				stop, wg := make(chan struct{}), sync.WaitGroup{}
				if reading {
					r, err := query.NewDuckDB(ctx, s.DB(), query.DuckDBOptions{})
					if err != nil {
						b.Fatal(err)
					}
					wg.Go(func() { streamed.Add(streamUntil(b, r, stop)) })
				}
				b.StartTimer()
				stageAndLoad(b, s, batches[untimed:], batchesPerLoad)
				b.StopTimer()
				close(stop)
				wg.Wait()
				s.Close()
				b.StartTimer()
			}
			secs := b.Elapsed().Seconds()
			timed := int64(len(batches)-untimed) * rowsPerBatch
			b.ReportMetric(float64(int64(b.N)*timed)/secs, "records/s")
			b.ReportMetric(float64(int64(b.N)*valueBytes*timed/int64(len(batches)*rowsPerBatch))/secs/1e6, "MB/s")
			b.ReportMetric(float64(streamed.Load())/secs, "streamed-rows/s")
		})
	}
}

// streamUntil reads the whole table through r, again and again, until
// stop closes, and returns the rows it read.
func streamUntil(b *testing.B, r *query.DuckDB, stop <-chan struct{}) int64 {
	var n int64
	for {
		select {
		case <-stop:
			return n
		default:
		}
		rr, err := r.Query(context.Background(), tenancy.Operator, "SELECT * FROM trace_raw")
		if err != nil {
			b.Error(err)
			return n
		}
		for rr.Next() {
			n += rr.RecordBatch().NumRows()
		}
		if err := rr.Err(); err != nil {
			b.Error(err)
		}
		rr.Release()
	}
}
