package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// rawBatch is offsets [first, first+n) of partition 0 of topic t as raw rows.
func rawBatch(first int64, n int) *sink.Batch {
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: first + int64(n) - 1}}}
	ids := envelope.NewUUIDs()
	var id [16]byte
	for i := range n {
		ids.Next(&id)
		start := len(b.Rows)
		b.Rows = envelope.AppendRawRow(b.Rows, &kgo.Record{Topic: "t", Offset: first + int64(i), Value: []byte(`{"o":1}`), Timestamp: time.Now()}, &id, envelope.ValueVerbatim)
		b.MaxLine = max(b.MaxLine, len(b.Rows)-start)
		b.Ranges[0].Records++
	}
	return b
}

// verify asked through a running run while it loads gives the verdict it
// gives on the stopped database: every load is whole (ledger and rows in
// one transaction), so no moment of the database has a count mismatch,
// and verify reads one (found by a review: its queries each read the
// loads committed when they started, and a load between the ledger's and
// the rows' said "ledger counts 0 records, tables hold 50").
func TestVerifyThroughRunWhileItLoads(t *testing.T) {
	cfg, snk := servedEvents(t)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // run's loads
		defer wg.Done()
		for next := int64(0); ctx.Err() == nil; next += 50 {
			f, err := snk.Stage(ctx, rawBatch(next, 50))
			if err != nil {
				return
			}
			if _, err := snk.Load(ctx, []sink.File{f}); err != nil {
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(8 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		out, code := ask(t, cfg, "verify")
		if code != exitOK {
			t.Fatalf("verify %d through run while it loads: exit %d (the database is consistent at every commit)\n%s", i, code, out)
		}
	}
}

// dlq list through a running run reads the dead-letter table and writes
// nothing: the commands that write the tables do not go through run
// (README "Reading while run runs"), as its loads and merges go on there.
// A --where that ended the statement and started others deleted run's
// rows and ledger (found by a review); it is refused as not a condition.
func TestDLQListThroughRunWritesNothing(t *testing.T) {
	cfg, snk := servedEvents(t)
	f, err := snk.Stage(context.Background(), rawBatch(0, 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snk.Load(context.Background(), []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	tb := snk.Tables()
	out, code := ask(t, cfg, "dlq", "list", "--where", "false; DELETE FROM "+tb.Main+"; DELETE FROM "+tb.Ledger+"; SELECT * FROM "+tb.DLQ+" WHERE true")
	var rows, ledger int64
	if err := snk.DB().QueryRow("SELECT (SELECT count(*) FROM "+tb.Main+"), (SELECT count(*) FROM "+tb.Ledger+")").Scan(&rows, &ledger); err != nil {
		t.Fatal(err)
	}
	if rows != 10 || ledger == 0 {
		t.Fatalf("dlq list through run (exit %d) deleted run's rows and ledger: %d rows, %d ledger ranges left\n%s", code, rows, ledger, out)
	}
	if code != exitUsage || !strings.Contains(out, "want a condition") {
		t.Errorf("dlq list --where with statements in it: exit %d, want %d saying it wants a condition\n%s", code, exitUsage, out)
	}
	if out, code := ask(t, cfg, "dlq", "list", "--where", "stage = 'load' OR \"offset\" >= 0"); code != exitOK {
		t.Errorf("dlq list with a condition through run: exit %d\n%s", code, out)
	}
}

// servedEvents is a DuckDB sink of raw table events, prepared, whose
// commands are served as a running run serves them (its socket).
func servedEvents(t *testing.T) (*config.Config, *duckdb.Sink) {
	t.Helper()
	cfg := config.Default()
	cfg.Sink.Table = "events"
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "t.duckdb")
	snk := openPrepared(t, cfg)
	reader, err := query.NewDuckDB(context.Background(), snk.DB(), query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveCommands(context.Background(), []loadTarget{{cfg, snk}}, reader, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(stop)
	return cfg, snk
}
