package duckdb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/verify"
)

// BenchmarkVerifyRanges: verify's reading of a raw table (the ledger, then
// the rows of the raw and dead-letter tables per ledger range, in one
// windowed query) against the yardstick of one GROUP BY counting each
// partition's rows and distinct offsets, the form of the counts it
// replaced. TRACELAKE_BENCH_VERIFY_ROWS raw rows (default 5,000,000) of
// 4 partitions, ledger ranges of 1,000 offsets, written by SQL.
func BenchmarkVerifyRanges(b *testing.B) {
	rows := int64(5_000_000)
	if v := os.Getenv("TRACELAKE_BENCH_VERIFY_ROWS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		rows = n
	}
	s := openWith(b, testOptions(b.TempDir()))
	ctx := context.Background()
	if err := s.Prepare(ctx); err != nil {
		b.Fatal(err)
	}
	tn := s.Tables()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s (uuid, koffset, kpartition, raw_data, record_metadata, add_time)
			SELECT uuid()::VARCHAR, i // 4, (i %% 4)::INTEGER, '{"o":1}', '{"topic":"t"}', now() FROM range(%d) r(i)`, tn.Main, rows),
		fmt.Sprintf(`INSERT INTO %s (topic, "partition", first_offset, last_offset, records, dlq_records, load_id, files, loaded_at)
			SELECT 't', p::INTEGER, r * 1000, r * 1000 + 999, 1000, 0, 'bench', 1, now()
			FROM range(4) a(p), range(%d) b(r)`, tn.Ledger, rows/4/1000),
	} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	tables := verify.Tables{Main: tn.Main, DLQ: tn.DLQ, Ledger: tn.Ledger, Raw: true, Topic: TopicExpr}
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			rep, err := verify.Run(ctx, verify.SQLQuerier{DB: s.DB()}, tables, nil, false)
			if err != nil || !rep.OK {
				b.Fatalf("verify: %v %v", err, rep)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("partition_counts", func(b *testing.B) {
		q := fmt.Sprintf(`SELECT %s, kpartition, count(*), count(DISTINCT koffset) FROM %s GROUP BY 1, 2`, TopicExpr, tn.Main)
		for b.Loop() {
			if _, err := (verify.SQLQuerier{DB: s.DB()}).QueryText(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
