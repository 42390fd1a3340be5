package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/obs"
)

// merge.every reports each model's merges to the metrics and the status
// page: rows of a good model, and the error of a model that cannot merge.
func TestMergeEveryReports(t *testing.T) {
	cfg := config.Default()
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "m.duckdb")
	snk, err := openDuckDB(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := snk.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO trace_raw SELECT uuid()::VARCHAR, i, 0, json_object('id', i, 'name', 'n' || i), json_object('topic', 't'), now() FROM range(5) r(i)`,
		`INSERT INTO trace_raw_ledger VALUES ('t', 0, 0, 4, 5, 0, 'l1', 1, now())`,
	} {
		if _, err := snk.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	good := config.Model{Name: "good", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"}, {Name: "name", Path: "$.name", Type: "VARCHAR"}}}.WithDefaults("trace_raw")
	bad := config.Model{Name: "bad", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "NOSUCHTYPE"}}}.WithDefaults("trace_raw")

	m, status := obs.New(), obs.NewStatus()
	done := make(chan struct{})
	go func() {
		defer close(done)
		mergeEvery(ctx, []mergeJob{{merger: merge.NewMerger(snk.DB(), slog.New(slog.DiscardHandler)), models: []config.Model{good, bad}}}, 10*time.Millisecond, m, status)
	}()
	deadline := time.Now().Add(30 * time.Second)
	// The bad model fails at every interval, and the loop goes on: a
	// failed merge is tried again at the next one.
	for testutil.ToFloat64(m.MergeFailures.WithLabelValues("bad")) < 3 || testutil.ToFloat64(m.MergeRawRows.WithLabelValues("good")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("within 30s: %v failures of the bad model (want 3 intervals' worth), %v rows of the good one merged",
				testutil.ToFloat64(m.MergeFailures.WithLabelValues("bad")), testutil.ToFloat64(m.MergeRawRows.WithLabelValues("good")))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	cancel()
	<-done
	if got := testutil.ToFloat64(m.MergeRawRows.WithLabelValues("good")); got != 5 {
		t.Errorf("raw rows merged = %v, want 5 (and nothing twice)", got)
	}
	if testutil.ToFloat64(m.MergeLastSuccess.WithLabelValues("good")) == 0 {
		t.Error("no last-success time")
	}
	models := status.Models()
	if len(models) != 2 || models[0].Name != "bad" || !strings.Contains(models[0].Err, "NOSUCHTYPE") ||
		models[1].Err != "" || models[1].LastSuccess.IsZero() {
		t.Errorf("status models: %+v", models)
	}
}
