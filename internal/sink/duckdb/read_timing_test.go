//go:build duckdb_arrow

package duckdb

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// BenchmarkLoadWhileReading loads spans as BenchmarkLoad does, alone and
// while a client of the read path streams the whole table over and over
// (SELECT * through query.DuckDB, as Flight SQL serves it): the loads'
// rate beside itself in the same run, with the reads giving way to the
// loads (yielding: query.DuckDBOptions.Loads) and not (reading). Each op
// loads two loads untimed, so that the table holds rows to stream, then
// the rest timed. reads_alone is what the reads make with no load: the
// same client streaming the table of the two untimed loads for three
// passes, timed.
func BenchmarkLoadWhileReading(b *testing.B) {
	batches, valueBytes := spanBatches()
	const untimed = 2 * batchesPerLoad
	ctx := context.Background()
	for _, v := range []struct {
		name              string
		reading, yielding bool
	}{{"alone", false, false}, {"reading", true, false}, {"yielding", true, true}} {
		b.Run(v.name, func(b *testing.B) {
			var streamed atomic.Int64
			for range b.N {
				b.StopTimer()
				s := loadedSink(b, batches[:untimed])
				stop, wg := make(chan struct{}), sync.WaitGroup{}
				if v.reading {
					opt := query.DuckDBOptions{}
					if v.yielding {
						opt.Loads = s.Loading()
					}
					r, err := query.NewDuckDB(ctx, s.DB(), opt)
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
	b.Run("reads_alone", func(b *testing.B) {
		var streamed int64
		for range b.N {
			b.StopTimer()
			s := loadedSink(b, batches[:untimed])
			r, err := query.NewDuckDB(ctx, s.DB(), query.DuckDBOptions{Loads: s.Loading()})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for range 3 {
				streamed += stream(b, r)
			}
			b.StopTimer()
			s.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(streamed)/b.Elapsed().Seconds(), "streamed-rows/s")
	})
}

// loadedSink is a sink of a new database that holds the batches' rows,
// loaded batchesPerLoad at a time.
func loadedSink(b *testing.B, batches []*sink.Batch) *Sink {
	s := openWith(b, testOptions(b.TempDir()))
	if err := s.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	stageAndLoad(b, s, batches, batchesPerLoad)
	return s
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
		n += stream(b, r)
		if b.Failed() {
			return n
		}
	}
}

// stream reads the whole table through r once and returns its rows.
func stream(b *testing.B, r *query.DuckDB) int64 {
	rr, err := r.Query(context.Background(), tenancy.Operator, "SELECT * FROM trace_raw")
	if err != nil {
		b.Error(err)
		return 0
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		b.Error(err)
	}
	return n
}
