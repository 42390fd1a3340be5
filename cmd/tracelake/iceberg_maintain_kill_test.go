package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// `tracelake run` in load mode taking every signal into Iceberg, killed
// with SIGKILL at random moments while the SDK's exporters send, with
// `tracelake compact` (the current day included) and `tracelake expire`
// (every snapshot but the current) run again and again beside it: the
// kills and the loads' commits land among maintenance commits, and each
// item answered 2xx must still be stored, once in its dedup model,
// verify OK. (Scheduled maintenance would run in the first process only:
// a killed holder's lease keeps the next starts' rounds away for minutes.)
func TestLongEverySignalKill9WithMaintenanceStoresEachAnsweredItem(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary while the SDK's exporters send")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	dir := t.TempDir()
	sink := fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q}}", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	everySignalAcrossStops(t, bin, sink, func(cfgPath, mark string) {
		stop, done := make(chan struct{}), make(chan struct{})
		rounds := 0
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, args := range [][]string{{"compact", "--target-size", "1MiB", "--min-age", "-24h"}, {"expire", "--older-than", "0s"}} {
					out, err := exec.Command(bin, append(args, "--config", cfgPath)...).CombinedOutput()
					if err != nil {
						t.Logf("%s: %v\n%s", args[0], err, out)
					}
				}
				rounds++
			}
		}()
		killAtRandomMomentsAfter(t, bin, cfgPath, 4, mark)
		close(stop)
		<-done
		t.Logf("%d maintenance rounds", rounds)
	})
}

// The same with the scheduled rounds of a `tracelake maintain` process
// (every second: the span tables' sort order declared, the current day
// compacted once two small files gather, manifests rewritten, every
// snapshot but the current expired), started before the runs so that it
// holds the maintenance lease throughout.
func TestLongEverySignalKill9BesideMaintainStoresEachAnsweredItem(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary while the SDK's exporters send")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	dir := t.TempDir()
	sink := fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q, maintenance: {every: 1s, small_files: 2, expire_after: 0s}}}",
		filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	everySignalAcrossStops(t, bin, sink, func(cfgPath, mark string) {
		// The tables made first: maintain opens them.
		startRunUntil(t, bin, cfgPath, "prepare", mark).stop(t)
		maint := exec.Command(bin, "maintain", "--config", cfgPath)
		var log strings.Builder
		maint.Stderr = &log
		if err := maint.Start(); err != nil {
			t.Fatal(err)
		}
		killAtRandomMomentsAfter(t, bin, cfgPath, 4, mark)
		_ = maint.Process.Signal(syscall.SIGTERM)
		if err := maint.Wait(); err != nil {
			t.Errorf("tracelake maintain: %v\n%s", err, log.String())
		}
		if !strings.Contains(log.String(), "compacted_files") {
			t.Errorf("tracelake maintain compacted nothing while the runs loaded:\n%s", log.String())
		}
	})
}
