package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
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
	snk, err := openDuckDB(cfg, false)
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
		`INSERT INTO trace_raw_ledger VALUES ('t', 0, 0, 4, 5, 0, 'l1', 1, now(), NULL)`,
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

// recordingMerger merges every model but those in fail, and records the
// models it was asked to merge.
type recordingMerger struct {
	fail   map[string]bool
	merged []string
}

func (r *recordingMerger) Merge(_ context.Context, m config.Model) (merge.Result, error) {
	r.merged = append(r.merged, m.Name)
	if r.fail[m.Name] {
		return merge.Result{}, fmt.Errorf("injected failure of %s", m.Name)
	}
	return merge.Result{Model: m.Name}, nil
}

// tracelake merge stopped at the first model that failed: with CDC, one
// changelog table without a primary key (merged first, by name) kept
// every other table's model from being merged at all. It now merges the
// others and fails naming each model that failed, as merge.every does.
func TestMergeLoopGoesOnPastAFailedModel(t *testing.T) {
	r := &recordingMerger{fail: map[string]bool{"a": true, "c": true}}
	models := []config.Model{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	err := mergeLoop(context.Background(), mergeJob{merger: r, models: models}, 0)
	if err == nil || !strings.Contains(err.Error(), "merge model a: injected failure of a") || !strings.Contains(err.Error(), "merge model c: injected failure of c") {
		t.Errorf("error: %v, want both failures named", err)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(r.merged, want) {
		t.Errorf("merged %q, want %q", r.merged, want)
	}
}
