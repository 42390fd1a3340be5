package iceberg_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// rolledBackTable loads offsets 0-29 of partition 0 in three loads and
// has another engine roll the raw table back to the second's snapshot:
// offsets 20-29 are gone from the table while its positions say 30.
func rolledBackTable(t *testing.T, dir string) *iceberg.Sink {
	t.Helper()
	ctx := context.Background()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		load(t, s, batch(0, i*10, i*10+9))
	}
	if err := openSink(t, dir, false).RollBackRaw(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return s
}

func wantRolledBack(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "was rolled back") ||
		!strings.Contains(err.Error(), `tracelake.position.traces.0=20`) {
		t.Fatalf("%s: %v; want the rollback reported, naming position 20", what, err)
	}
}

// A running sink whose table another engine rolls back past its loads
// finds it at its next load, before committing: the load fails with the
// start's error and the table is left as the rollback left it (its rows
// and positions), so no record is skipped. A restart still refuses; the
// recovery the error names (set the positions, restart) loads the
// rolled-back records again, once, and the starts after it pass.
func TestRollbackIsReportedAtTheNextLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := rolledBackTable(t, dir)
	before, err := s.RawProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, files, err := tryLoad(t, s, batch(0, 30, 39))
	wantRolledBack(t, "the load after a rollback", err)
	s.Discard(files)
	after, err := s.RawProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before["tracelake.position.traces.0"] != after["tracelake.position.traces.0"] {
		t.Errorf("position %s after the refused load, want %s", after["tracelake.position.traces.0"], before["tracelake.position.traces.0"])
	}
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19)) {
		t.Errorf("raw offsets %v after the refused load, want 0-19 (the rollback's)", got)
	}
	wantRolledBack(t, "the start after the refused load", openSink(t, dir, false).Prepare(ctx))

	// The documented recovery: the positions of the current snapshot.
	if err := s.SetTableProperty(ctx, "tracelake.position.traces.0", "20"); err != nil {
		t.Fatal(err)
	}
	r := openSink(t, dir, false)
	if err := r.Prepare(ctx); err != nil {
		t.Fatalf("start with the positions set as the error says: %v", err)
	}
	load(t, r, batch(0, 20, 29))
	load(t, r, batch(0, 30, 39))
	props, err := r.RawProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if props[iceberg.RollbackCheckedKey] == "" {
		t.Errorf("%s not set by the recovery's first load", iceberg.RollbackCheckedKey)
	}
	if got := stored(t, r, false)[0]; !slices.Equal(got, seq(0, 39)) {
		t.Errorf("raw offsets %v after the recovery, want 0-39 once", got)
	}
	r = openSink(t, dir, false)
	if err := r.Prepare(ctx); err != nil {
		t.Fatalf("start after the recovery's loads: %v", err)
	}
	load(t, r, batch(0, 40, 49))
	if got := stored(t, r, false)[0]; !slices.Equal(got, seq(0, 49)) {
		t.Errorf("raw offsets %v, want 0-49 once", got)
	}
}

// A load that landed on top of a rollback from the positions the
// properties held (a tracelake version without the load-time check)
// skipped the rolled-back records: the start keeps reporting it, though
// the rolled-back load's snapshot is now older than the current one.
func TestRollbackIsReportedAfterALoadOnTop(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := rolledBackTable(t, dir)
	if err := s.LoadAsBefore(ctx, batch(0, 30, 39)); err != nil {
		t.Fatal(err)
	}
	err := openSink(t, dir, false).Prepare(ctx)
	if err == nil || !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "was rolled back") {
		t.Fatalf("start after a load on top of a rollback: %v; want the rollback reported", err)
	}
}

// The dead-letter table commits before the main table: a load with dead
// letters after a rollback of the main table commits neither.
func TestRollbackStopsTheLoadBeforeItsDeadLetters(t *testing.T) {
	s := rolledBackTable(t, t.TempDir())
	_, files, err := tryLoad(t, s, batch(0, 30, 39, 33))
	wantRolledBack(t, "the load after a rollback", err)
	s.Discard(files)
	if got := stored(t, s, true)[0]; len(got) != 0 {
		t.Errorf("dead-letter offsets %v after the refused load, want none", got)
	}
}

// Positions set back while a sink runs do not let it go on: its records
// come from where it read before, not from them (30 on, where the
// positions say 20); it stops at its next load, and a restart reads from
// them.
func TestRollbackFixedWhileRunningStillStopsTheLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := rolledBackTable(t, dir)
	if err := s.SetTableProperty(ctx, "tracelake.position.traces.0", "20"); err != nil {
		t.Fatal(err)
	}
	_, files, err := tryLoad(t, s, batch(0, 30, 39))
	wantRolledBack(t, "the running sink's load after positions set back", err)
	s.Discard(files)
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19)) {
		t.Errorf("raw offsets %v after the refused load, want 0-19", got)
	}
	if err := openSink(t, dir, false).Prepare(ctx); err != nil {
		t.Errorf("start with the positions set back: %v", err)
	}
}
