package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// TestWeekOfLoads is the week benchmark (docs/BENCHMARKS.md, "iceberg_week")
// in compressed time: seven simulated days of loads, loadsPerHour an hour,
// each of the hour's events in batchesPerLoad batches of one worker, with a maintenance round at the end of every
// simulated hour on the simulated clock. Data volume and file counts are
// scaled down (3 loads an hour, not 80 files a second); expiry keeps a
// simulated day of snapshots (retain-last), the scaled equivalent of the
// default 24h. Set TRACELAKE_WEEK=1 to run it (about a minute); with
// TRACELAKE_WEEK_OUT=file it writes the curve as a Markdown table.
func TestWeekOfLoads(t *testing.T) {
	if os.Getenv("TRACELAKE_WEEK") == "" {
		t.Skip("the week benchmark: set TRACELAKE_WEEK=1")
	}
	const days, loadsPerHour, batchesPerLoad, rowsPerLoad = 7, 3, 10, 20
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	metaDir := filepath.Join(dir, "warehouse", "tracelake.db", "trace_raw", "metadata")
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-(days + 1) * 24 * time.Hour)
	clock := start
	opt := roundOptions
	opt.Now = func() time.Time { return clock }
	// A simulated day of commits: the loads and about three maintenance
	// commits (compaction, manifests, expiry) an hour.
	opt.ExpireOlderThan, opt.RetainLast = 0, 24*(loadsPerHour+3)
	m := s.NewMaintainer(opt)
	var curve []string
	var worstFiles, worstManifests, periodFiles int
	var worstMeta int64
	var worstPlan time.Duration
	next := int64(0)
	for hour := range days * 24 {
		for range loadsPerHour {
			// A worker's batches of one commit: one file between them.
			var batches []*sink.Batch
			for range batchesPerLoad {
				b := batch(0, next, next+rowsPerLoad/batchesPerLoad-1)
				for i := range b.Records {
					b.Records[i].Record.Timestamp = clock.Add(time.Duration(next+int64(i)) % 60 * time.Minute)
				}
				batches = append(batches, b)
				next += rowsPerLoad / batchesPerLoad
			}
			if _, err := s.Load(ctx, stage(t, s, "worker", batches...)); err != nil {
				t.Fatal(err)
			}
		}
		hourStart := clock
		clock = clock.Add(time.Hour)
		if _, err := m.Round(ctx); err != nil {
			t.Fatal(err)
		}
		perDay, median := filesPerDay(t, s)
		manifests, err := s.RawManifests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, meta := metadataFiles(t, metaDir)
		planned, took, err := s.PlanRawHour(ctx, hourStart)
		if err != nil {
			t.Fatal(err)
		}
		if planned == 0 {
			t.Fatalf("hour %d: planning the hour's scan found no file", hour)
		}
		worstFiles, worstManifests = max(worstFiles, perDay), max(worstManifests, len(manifests))
		periodFiles = max(periodFiles, perDay)
		worstMeta, worstPlan = max(worstMeta, int64(meta.bytes)), max(worstPlan, took)
		if hour%12 == 11 {
			curve = append(curve, fmt.Sprintf("| %d | %d | %d | %d | %d | %d | %d | %.1f |",
				hour+1, perDay, periodFiles, median, len(manifests), meta.bytes, len(meta.Snapshots), float64(took.Microseconds())/1000))
			periodFiles = 0
		}
	}
	table := "| simulated hour | files per day partition (max) | most over the last 12 hours | median file bytes | manifests | metadata.json bytes | snapshots | plan one hour (ms) |\n" +
		"|---|---|---|---|---|---|---|---|\n" + strings.Join(curve, "\n") + "\n"
	t.Logf("\n%s", table)
	if out := os.Getenv("TRACELAKE_WEEK_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The bounds of the issue, scaled: SmallFiles and one hour's loads
	// per day partition; a manifest per day partition (clustered by the
	// rewrite) and the one the last loads added.
	if worstFiles > opt.SmallFiles+loadsPerHour || worstManifests > days+2 || worstMeta > 2<<20 || worstPlan > 100*time.Millisecond {
		t.Errorf("over the week: at most %d files per day partition (bound %d), %d manifests (bound %d), metadata.json %d bytes (2 MiB), planning %s (100ms)",
			worstFiles, opt.SmallFiles+loadsPerHour, worstManifests, days+2, worstMeta, worstPlan)
	}
}

// filesPerDay returns the most data files any day partition of the raw
// table holds, and the median data file's size.
func filesPerDay(t *testing.T, s *iceberg.Sink) (most int, median int64) {
	t.Helper()
	files, err := s.DataFiles(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	perDay := map[string]int{}
	var sizes []int64
	for _, f := range files {
		day := fmt.Sprint(f.Partition()[1000]) // the day partition's field id
		perDay[day]++
		most = max(most, perDay[day])
		sizes = append(sizes, f.FileSizeBytes())
	}
	slices.Sort(sizes)
	if len(sizes) > 0 {
		median = sizes[len(sizes)/2]
	}
	return most, median
}
