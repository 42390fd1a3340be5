package merge

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
)

// BenchmarkMarkReady measures a round's done marks at the seed's scale:
// 3,000 changelog tables, a topic each of 3 partitions, every table
// merged, the ledger of many loads (TRACELAKE_BENCH_LEDGER rows, default
// 1,000,000: a load writes a row per partition it covers, and the ledger
// is never pruned) and the listing of every partition, caught up.
func BenchmarkMarkReady(b *testing.B) {
	const tables, parts = 3000, 3
	ledgerRows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("TRACELAKE_BENCH_LEDGER")); err == nil && v > 0 {
		ledgerRows = v
	}
	l := newChangeLoader(b)
	l.change(0, "seed", "c", 1, row(1, "a"), "id") // creates the sink's tables
	l.flush()
	l.mustMerge()
	h := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	perPart := ledgerRows / (tables * parts)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO cdc_routes SELECT 't' || t || '_log', 'db', '', 't' || t, now(), 't' || t FROM range(%d) r(t)`, tables),
		fmt.Sprintf(`INSERT INTO cdc_routes_reached SELECT 't' || t || '_log', 'srv.db.t' || t, p, %[3]d, TIMESTAMP '%[4]s', TIMESTAMP '%[4]s' + INTERVAL 47 HOUR, now()
			FROM range(%[1]d) r(t), range(%[2]d) q(p)`, tables, parts, max(perPart, 1), h.Format(time.DateTime)),
		fmt.Sprintf(`INSERT INTO %s SELECT 't' || t, 'srv.db.t' || t, p, %d, now() FROM range(%d) r(t), range(%d) q(p)`, WatermarkTable, max(perPart, 1), tables, parts),
		fmt.Sprintf(`INSERT INTO cdc_ledger SELECT 'srv.db.t' || (i // %[2]d %% %[1]d), i %% %[2]d, i // (%[1]d * %[2]d), i // (%[1]d * %[2]d), 1, 0, 'l', 1, now()
			FROM range(%[3]d) r(i)`, tables, parts, ledgerRows),
	} {
		if _, err := l.s.DB().Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	listing := map[sink.TopicPartition]Offsets{}
	for t := range tables {
		for p := range parts {
			listing[sink.TopicPartition{Topic: fmt.Sprintf("srv.db.t%d", t), Partition: int32(p)}] = Offsets{End: int64(max(perPart, 1))}
		}
	}
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) { return listing, nil }
	marked := int64(0)
	for b.Loop() {
		if _, err := l.s.DB().Exec(`DELETE FROM tracelake_ready`); err != nil && marked > 0 {
			b.Fatal(err)
		}
		n, err := l.merger.MarkReady(context.Background(), Marking{Now: time.Now(), Ends: ends})
		if err != nil {
			b.Fatal(err)
		}
		marked = n
	}
	if marked < tables*46 {
		b.Fatalf("%d marks, want every table's 46 hours", marked)
	}
	b.ReportMetric(float64(marked), "marks/op")
}
