package duckdb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// idle reports whether l says no load is in flight.
func idle(l *Loading) bool {
	select {
	case <-l.Idle():
		return true
	default:
		return false
	}
}

// Readers of the database give way to loads only if the sink says when
// they are in flight: from a load's start to its end (commit included),
// for every sink of the database, the ones Beside it included.
func TestLoadingSignalsLoadsInFlight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := openPrepared(t, testOptions(dir))
	opt := testOptions(dir)
	opt.Table, opt.StageDir = "other_raw", filepath.Join(dir, "other-stage")
	second, err := first.Beside(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if second.Loading() != first.Loading() {
		t.Fatal("a sink Beside another signals its loads apart: the reader of the database would not see them")
	}
	l := first.Loading()
	if !idle(l) {
		t.Fatal("a load in flight before any began")
	}
	for _, s := range []*Sink{first, second} {
		f, err := s.Stage(ctx, batch(0, 9))
		if err != nil {
			t.Fatal(err)
		}
		inFlight := false
		if _, err := s.LoadReporting(ctx, []sink.File{f}, func() { inFlight = !idle(l) }); err != nil {
			t.Fatal(err)
		}
		if !inFlight {
			t.Fatalf("%s: no load in flight while one was committing", s.opt.Table)
		}
		if !idle(l) {
			t.Fatalf("%s: a load still in flight after it returned", s.opt.Table)
		}
	}
}

// Loads overlap (one waits for the lock while another commits): the
// database is idle only once the last ends.
func TestLoadingIdleAfterTheLastLoad(t *testing.T) {
	l := newLoading()
	endA := l.begin()
	endB := l.begin()
	endA()
	endA() // twice is once
	if idle(l) {
		t.Fatal("idle while a load is still in flight")
	}
	endB()
	if !idle(l) {
		t.Fatal("not idle after every load ended")
	}
}
