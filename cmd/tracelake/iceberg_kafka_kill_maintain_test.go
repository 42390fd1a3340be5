package main

import (
	"context"
	"os/exec"
	"testing"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// SIGKILL at random moments while `tracelake run` writes Kafka JSON into
// Iceberg and tracelake compact (the current day included) and expire
// (every snapshot but the current) run again and again beside it: the
// kills land among maintenance commits, the restarts resume from positions
// a compaction or an expiry committed around; every message is in the raw
// table exactly once and verify agrees.
func TestLongIcebergKill9BesideCompactAndExpire(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("builds and runs the binary; long: run with -run '^TestLong' without -race")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	dir := t.TempDir()
	cfgPath := writeIcebergConfig(t, dir, cluster)
	const first, during = 10_000, 10_000
	if err := tracegen.Produce(context.Background(), prod, testTopic, first, 1, nil); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, testTopic, during, 2, nil) }()
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
				if out, err := exec.Command(bin, append(args, "--config", cfgPath)...).CombinedOutput(); err != nil {
					t.Logf("%s: %v\n%s", args[0], err, out)
				}
			}
			rounds++
		}
	}()
	killAtRandomMoments(t, bin, cfgPath, 4)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	close(stop)
	<-done
	t.Logf("%d maintenance rounds", rounds)
	checkIcebergOnce(t, openIcebergDir(t, dir), bin, cfgPath, first+during, 0)
}
