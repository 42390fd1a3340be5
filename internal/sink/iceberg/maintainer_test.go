package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

var roundOptions = iceberg.MaintenanceOptions{
	TargetFileBytes: 64 << 20, SmallFiles: 8, ExpireOlderThan: 24 * time.Hour, RetainLast: 1, Lease: time.Hour,
}

// TestMaintainerCompactsTheCurrentDay: a round compacts the day loads are
// writing to once it holds SmallFiles small files, which `tracelake
// compact` leaves until the day ended, and leaves it while it holds fewer.
func TestMaintainerCompactsTheCurrentDay(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(12) {
		load(t, s, batch(0, i*10, i*10+9))
	}
	old, err := s.Compact(ctx, 64<<20, time.Now().Add(-time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	if old[0].FilesBefore != 0 {
		t.Fatalf("compact with the default --min-age planned %d files of the current day, want none", old[0].FilesBefore)
	}
	m := s.NewMaintainer(roundOptions)
	r, err := m.Round(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.HeldBy != "" || r.Compacted[0].FilesBefore != 12 || r.Compacted[0].FilesAfter != 1 {
		t.Errorf("round %+v: want the 12 files of today compacted into 1", r)
	}
	if n := rawFiles(t, s); n != 1 {
		t.Errorf("%d raw data files after the round, want 1", n)
	}
	for i := range int64(5) {
		load(t, s, batch(0, 120+i*10, 120+i*10+9))
	}
	r, err = m.Round(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Compacted[0].FilesBefore != 0 || rawFiles(t, s) != 6 {
		t.Errorf("round %+v, %d raw files: want the 6 files (fewer than SmallFiles) left", r, rawFiles(t, s))
	}
	if got := stored(t, s, false); len(got[0]) != 170 {
		t.Errorf("%d rows after maintenance, want 170", len(got[0]))
	}
}

// TestMaintenanceLeaseOneProcessAtATime: two processes on one catalog;
// the second's round is skipped while the first's lease holds, and runs
// once it lapsed.
func TestMaintenanceLeaseOneProcessAtATime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := openSink(t, dir, false), openSink(t, dir, false)
	for _, s := range []*iceberg.Sink{a, b} {
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	load(t, a, batch(0, 0, 9))
	ma, mb := a.NewMaintainer(roundOptions), b.NewMaintainer(roundOptions)
	if r, err := ma.Round(ctx); err != nil || r.HeldBy != "" || len(r.Expired) == 0 {
		t.Fatalf("first process's round: %+v, %v; want it run", r, err)
	}
	r, err := mb.Round(ctx)
	if err != nil || r.HeldBy == "" || len(r.Compacted)+len(r.Expired) != 0 {
		t.Fatalf("second process's round: %+v, %v; want it skipped for the first's lease", r, err)
	}
	if r, err := ma.Round(ctx); err != nil || r.HeldBy != "" {
		t.Errorf("the holder's next round: %+v, %v; want it run (renewed)", r, err)
	}
	// The lease cleared (as if its holder's lapsed long ago), a process
	// claims it for a nanosecond, as one that stopped right after its
	// round: the lapsed lease no longer keeps the second away.
	lapsing := roundOptions
	lapsing.Lease = time.Nanosecond
	a.SetTableProperty(ctx, "tracelake.maintenance.lease", "") //nolint:errcheck // checked by the rounds below
	if r, err := a.NewMaintainer(lapsing).Round(ctx); err != nil || r.HeldBy != "" {
		t.Fatalf("a round with the lease cleared: %+v, %v; want it run", r, err)
	}
	if r, err := mb.Round(ctx); err != nil || r.HeldBy != "" {
		t.Errorf("round %+v, %v: want the second process to take the lapsed lease", r, err)
	}
}

func rawFiles(t *testing.T, s *iceberg.Sink) int {
	t.Helper()
	files, err := s.DataFiles(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// TestMaintainerRunsOnSchedule: Run runs rounds until its context ends,
// each told to OnRound, and returns.
func TestMaintainerRunsOnSchedule(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(8) {
		load(t, s, batch(0, i*10, i*10+9))
	}
	rounds := make(chan iceberg.MaintenanceRound)
	opt := roundOptions
	opt.OnRound = func(r iceberg.MaintenanceRound, err error) {
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		select {
		case rounds <- r:
		case <-ctx.Done():
		}
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.NewMaintainer(opt).Run(ctx, time.Millisecond)
	}()
	first, second := <-rounds, <-rounds
	cancel()
	<-stopped
	if first.Compacted[0].FilesBefore != 8 || first.Compacted[0].FilesAfter != 1 || second.HeldBy != "" {
		t.Errorf("rounds %+v then %+v: want the 8 files of today compacted, then a round of the same holder", first, second)
	}
	if n := rawFiles(t, s); n != 1 {
		t.Errorf("%d raw files after the scheduled rounds, want 1", n)
	}
}
