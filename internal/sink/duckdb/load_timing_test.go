package duckdb

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// loadsPerOp loads of rowsPerLoad synthetic spans are one benchmark op: a
// table that already holds rows, as in a running pipeline, not a first
// insert into an empty file.
const loadsPerOp, batchesPerLoad, rowsPerBatch = 5, 10, 10_000

// spanBatches encodes loadsPerOp*batchesPerLoad batches of rowsPerBatch
// agent-trace spans as the batcher does (NDJSON raw rows).
func spanBatches() (batches []*sink.Batch, valueBytes int64) {
	g := tracegen.New(1)
	ids := envelope.NewUUIDs()
	for i := range loadsPerOp * batchesPerLoad {
		bt := &sink.Batch{}
		first := int64(i * rowsPerBatch)
		for o := first; o < first+rowsPerBatch; o++ {
			r := &kgo.Record{Topic: "t", Offset: o, Value: g.Append(nil), Key: g.Key(), Timestamp: time.Now()}
			var id [16]byte
			ids.Next(&id)
			start := len(bt.Rows)
			bt.Rows = envelope.AppendRawRow(bt.Rows, r, &id, envelope.ValueVerbatim)
			bt.MaxLine = max(bt.MaxLine, len(bt.Rows)-start)
			valueBytes += int64(len(r.Value))
		}
		bt.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: first + rowsPerBatch - 1, Records: rowsPerBatch}}
		batches = append(batches, bt)
	}
	return batches, valueBytes
}

func reportRate(b *testing.B, valueBytes int64) {
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*loadsPerOp*batchesPerLoad*rowsPerBatch)/secs, "records/s")
	b.ReportMetric(float64(int64(b.N)*valueBytes)/secs/1e6, "MB/s")
}

// BenchmarkLoad is the sink's own path for 500,000 spans: stage each batch
// as an NDJSON file, then load 10 files (100,000 rows) per transaction with
// their ledger rows, DuckDB's automatic checkpoints included; with the raw
// table's JSON columns compressed as DuckDB picks (json=auto, the
// default), with zstd (json=zstd) and uncompressed (json=none); and, as
// loads=default, loads of the files that
// reach the default load.max_bytes, as the pipeline's loader makes them
// (the yardstick of the pipeline at its defaults). It reports the database
// file's size and the CPU time per row (every thread of the process:
// DuckDB's work).
func BenchmarkLoad(b *testing.B) {
	batches, valueBytes := spanBatches()
	ctx := context.Background()
	defaultLoad := int((int64(config.Default().LoadBytes())*int64(len(batches)) + valueBytes - 1) / valueBytes)
	for _, v := range []struct {
		json    JSONCompression
		perLoad int // batches per load
	}{{JSONAuto, batchesPerLoad}, {JSONZstd, batchesPerLoad}, {JSONNone, batchesPerLoad}, {JSONAuto, defaultLoad}, {JSONZstd, defaultLoad}} {
		name := "json=" + string(v.json)
		if v.perLoad != batchesPerLoad {
			name += ",loads=default"
		}
		b.Run(name, func(b *testing.B) {
			var cpu time.Duration
			for range b.N {
				b.StopTimer()
				opt := testOptions(b.TempDir())
				opt.JSONCompression = v.json
				s := openWith(b, opt)
				if err := s.Prepare(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				cpu -= processCPU()
				stageAndLoad(b, s, batches, v.perLoad)
				cpu += processCPU()
				b.StopTimer()
				s.Close()
				if st, err := os.Stat(opt.Path); err == nil {
					b.ReportMetric(float64(st.Size())/1e6, "file-MB")
				}
				b.StartTimer()
			}
			reportRate(b, valueBytes)
			b.ReportMetric(float64(v.perLoad*rowsPerBatch), "rows/load")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*loadsPerOp*batchesPerLoad*rowsPerBatch), "cpu-µs/row")
		})
	}
}

// stageAndLoad stages the batches and loads them, perLoad files per load
// (the last load what is left), as the pipeline does.
func stageAndLoad(b *testing.B, s *Sink, batches []*sink.Batch, perLoad int) {
	ctx := context.Background()
	for l := 0; l < len(batches); l += perLoad {
		var files []sink.File
		for _, bt := range batches[l:min(l+perLoad, len(batches))] {
			f, err := s.Stage(ctx, bt)
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
		if _, err := s.Load(ctx, files); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU is the CPU time (user and system) of this process so far, all
// threads, DuckDB's included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScanJSON is what each json_compression costs the reads: a
// query that parses every raw_data of BenchmarkLoad's 500,000 spans,
// loaded as the sink loads them and checkpointed, in rows/s.
func BenchmarkScanJSON(b *testing.B) {
	batches, _ := spanBatches()
	ctx := context.Background()
	for _, json := range []JSONCompression{JSONAuto, JSONZstd, JSONNone} {
		b.Run("json="+string(json), func(b *testing.B) {
			opt := testOptions(b.TempDir())
			opt.JSONCompression = json
			s := openWith(b, opt)
			if err := s.Prepare(ctx); err != nil {
				b.Fatal(err)
			}
			stageAndLoad(b, s, batches, batchesPerLoad)
			if _, err := s.DB().ExecContext(ctx, "CHECKPOINT"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				var n int64
				if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM trace_raw WHERE raw_data->>'$.kind' = 'llm'`).Scan(&n); err != nil || n == 0 {
					b.Fatalf("%d llm spans (%v)", n, err)
				}
			}
			b.ReportMetric(float64(b.N*loadsPerOp*batchesPerLoad*rowsPerBatch)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
