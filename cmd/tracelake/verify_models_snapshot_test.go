package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/verify"
)

// verify through a running run while it loads reports a model's raw rows
// not merged yet of the same moment as the rows it counts: a model never
// merged has every raw row pending, so at any moment the two agree. The
// models' counts were read on run's database outside verify's snapshot,
// after it, and counted the loads committed since (pending rows past the
// rows of the table, rows that verify's own counts do not hold).
func TestVerifyModelsThroughRunWhileItLoads(t *testing.T) {
	cfg := config.Default()
	cfg.Sink.Table = "events"
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "t.duckdb")
	cfg.Merge.Models = []config.Model{{Name: "by_o", Key: []string{"o"}, Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}}}}
	snk := openPrepared(t, cfg)
	reader, err := query.NewDuckDB(context.Background(), snk.DB(), query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveCommands(context.Background(), []loadTarget{{cfg, snk}}, reader, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(stop)

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
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		out, code := ask(t, cfg, "verify", "--json")
		if code != exitOK {
			t.Fatalf("verify %d through run while it loads: exit %d\n%s", i, code, out)
		}
		var rep verify.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("verify %d: %v\n%s", i, err, out)
		}
		var rows int64
		for _, p := range rep.Partitions {
			rows += p.Rows
		}
		if len(rep.Models) != 1 || rep.Models[0].Pending != rows {
			t.Fatalf("verify %d through run while it loads: the table holds %d rows and models %+v, want every row pending for the model never merged (one moment)\n%s", i, rows, rep.Models, out)
		}
	}
}
