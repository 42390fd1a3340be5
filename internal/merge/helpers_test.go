package merge

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

const testTopic = "cdc"

// rawLoader writes messages into a real raw table through the DuckDB sink,
// as the pipeline does: one batch per partition per flush, with ledger rows.
type rawLoader struct {
	t       testing.TB
	s       *duckdb.Sink
	next    map[int32]int64
	pending map[int32][]*kgo.Record
	ids     *envelope.UUIDs
}

func newRawLoader(t testing.TB) *rawLoader {
	t.Helper()
	dir := t.TempDir()
	s, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "m.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: "trace_raw", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &rawLoader{t: t, s: s, next: map[int32]int64{}, pending: map[int32][]*kgo.Record{}, ids: envelope.NewUUIDs()}
}

func (l *rawLoader) db() *sql.DB { return l.s.DB() }

// add queues a message (nil value: a Kafka tombstone) for partition p.
func (l *rawLoader) add(p int32, value []byte) {
	l.pending[p] = append(l.pending[p], &kgo.Record{Topic: testTopic, Partition: p, Offset: l.next[p], Value: value, Timestamp: time.Now()})
	l.next[p]++
}

// flush loads everything queued.
func (l *rawLoader) flush() {
	l.t.Helper()
	ctx := context.Background()
	var files []sink.File
	for p, recs := range l.pending {
		if len(recs) == 0 {
			continue
		}
		b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: testTopic, Partition: p},
			First: recs[0].Offset, Last: recs[len(recs)-1].Offset, Records: int64(len(recs))}}}
		var id [16]byte
		for _, r := range recs {
			l.ids.Next(&id)
			b.Rows = envelope.AppendRawRow(b.Rows, r, &id, envelope.ValueVerbatim)
		}
		f, err := l.s.Stage(ctx, b)
		if err != nil {
			l.t.Fatal(err)
		}
		files = append(files, f)
	}
	clear(l.pending)
	if len(files) == 0 {
		return
	}
	if _, err := l.s.Load(ctx, files); err != nil {
		l.t.Fatal(err)
	}
}

// querier is a database or a transaction (one snapshot of it).
type querier interface {
	Query(q string, args ...any) (*sql.Rows, error)
}

// dump renders a query's rows in db as sorted lines "v1|v2|…", for
// comparison.
func dump(t testing.TB, db querier, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// mustMerge merges m once with mg.
func mustMerge(t testing.TB, mg *Merger, m config.Model) {
	t.Helper()
	if _, err := mg.Merge(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}
