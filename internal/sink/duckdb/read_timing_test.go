//go:build duckdb_arrow

package duckdb

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// BenchmarkLoadWhileReading loads spans as BenchmarkLoad does, alone and
// while a client of the read path streams the whole table over and over
// (SELECT * through query.DuckDB, as Flight SQL serves it), with the
// reads giving way to the loads (yielding: query.DuckDBOptions.Loads) and
// not (reading): the loads' rate beside itself. Each op runs the three
// one after the other, in an order that turns from op to op, so that
// each shares the machine's load of the moment with the others (a
// shared machine's load moves more between sub-benchmarks than the
// reads do); each loads two loads untimed, so that the table holds rows
// to stream, then the rest timed. reads_alone is what the reads make
// with no load: the same client streaming the table of the two untimed
// loads for three passes. interleaved,beside_pipeline runs DuckDB with
// the threads tracelake run gives it beside its pipeline.
func BenchmarkLoadWhileReading(b *testing.B) {
	batches, valueBytes := spanBatches()
	const untimed = 2 * batchesPerLoad
	ctx := context.Background()
	for _, beside := range []bool{false, true} {
		name := map[bool]string{false: "interleaved", true: "interleaved,beside_pipeline"}[beside]
		b.Run(name, func(b *testing.B) { loadWhileReading(b, batches, valueBytes, beside) })
	}
	b.Run("reads_alone", func(b *testing.B) {
		var streamed int64
		for range b.N {
			b.StopTimer()
			s := loadedSink(b, batches[:untimed], false)
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

// loadWhileReading is an op of BenchmarkLoadWhileReading/interleaved:
// beside, DuckDB's threads as tracelake run sets them beside its
// pipeline (one core fewer: 1 on 2 cores).
func loadWhileReading(b *testing.B, batches []*sink.Batch, valueBytes int64, beside bool) {
	const untimed = 2 * batchesPerLoad
	ctx := context.Background()
	variants := []struct {
		name              string
		reading, yielding bool
	}{{"alone", false, false}, {"reading", true, false}, {"yielding", true, true}}
	secs := make([]float64, len(variants))
	streamed := make([]atomic.Int64, len(variants))
	for op := range b.N {
		for i := range variants {
			i = (i + op) % len(variants)
			v := variants[i]
			s := loadedSink(b, batches[:untimed], beside)
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
				wg.Go(func() { streamed[i].Add(streamUntil(b, r, stop)) })
			}
			start := time.Now()
			stageAndLoad(b, s, batches[untimed:], batchesPerLoad)
			secs[i] += time.Since(start).Seconds()
			close(stop)
			wg.Wait()
			s.Close()
		}
	}
	timed := int64(len(batches)-untimed) * rowsPerBatch
	mb := float64(int64(b.N)*valueBytes*timed/int64(len(batches)*rowsPerBatch)) / 1e6
	for i, v := range variants {
		b.ReportMetric(mb/secs[i], v.name+"-MB/s")
		if v.reading {
			b.ReportMetric(secs[0]/secs[i]*100, v.name+"-%-of-alone")
			b.ReportMetric(float64(streamed[i].Load())/secs[i], v.name+"-streamed-rows/s")
		}
	}
}

// loadedSink is a sink of a new database that holds the batches' rows,
// loaded batchesPerLoad at a time; beside, with DuckDB's threads as
// tracelake run sets them beside its pipeline.
func loadedSink(b *testing.B, batches []*sink.Batch, beside bool) *Sink {
	opt := testOptions(b.TempDir())
	opt.BesidePipeline = beside
	s := openWith(b, opt)
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
