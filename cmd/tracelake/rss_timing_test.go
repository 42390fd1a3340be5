package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// build is a tracelake binary to measure.
type build struct{ name, bin string }

// builds are this package's build and, with TRACELAKE_BASELINE_BIN set to
// another build of tracelake, that one: run one after the other over the
// same records, it is the yardstick of a change to memory or speed.
func builds(b *testing.B) []build {
	bs := []build{{"build=this", buildBinary(b)}}
	if base := os.Getenv("TRACELAKE_BASELINE_BIN"); base != "" {
		bs = append(bs, build{"build=baseline", base})
	}
	return bs
}

// benchConfig is TRACELAKE_BENCH_CONFIG: top-level YAML lines added to the
// measured runs' config (max_inflight_bytes: 1GiB, say), to measure a
// setting against the defaults.
func benchConfig() string { return os.Getenv("TRACELAKE_BENCH_CONFIG") }

// BenchmarkPeakRSSSpans measures the peak resident memory of a
// `tracelake run` process ingesting 600,000 ~1 KB agent-trace spans with
// the default settings (Kafka runs in this, the parent, process).
func BenchmarkPeakRSSSpans(b *testing.B) {
	builds := builds(b)
	cluster, cl := startKafka(b, 4)
	const n = 600_000
	if err := tracegen.Produce(context.Background(), cl, testTopic, n, 1, nil); err != nil {
		b.Fatal(err)
	}
	group := 0
	for _, build := range builds {
		b.Run(build.name, func(b *testing.B) {
			for range b.N {
				group++
				cfgPath := writeConfig(b, cluster, fmt.Sprintf("group: rss-%d", group), benchConfig())
				start := time.Now()
				peak := runMeasuringRSS(b, exec.Command(build.bin, "run", "--config", cfgPath, "--exit-when-idle", "1s"))
				b.ReportMetric(float64(n)/(time.Since(start)-time.Second).Seconds(), "records/s")
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			}
		})
	}
}

// BenchmarkPeakRSS measures the peak resident memory of a `tracelake run`
// process ingesting a backlog of 1 GiB in ~1 MB messages with the default
// settings (Kafka runs in this, the parent, process): values of random hex
// (compressible about 2x, like text) and, as compressible=x, of one
// repeated letter (~20x: a fetch of a few MB holds ~100 MB of records).
func BenchmarkPeakRSS(b *testing.B) {
	builds := builds(b)
	for _, letters := range []bool{false, true} {
		name := "compressible=hex"
		if letters {
			name = "compressible=x"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cluster, _ := startKafka(b, 4)
				cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerBatchMaxBytes(1<<20))
				if err != nil {
					b.Fatal(err)
				}
				defer cl.Close()
				filler := bytes.Repeat([]byte("x"), 1_000_000-64) // ~1 MB: under the broker's default message limit
				for j := range 1100 {                             // ~1.02 GiB
					if !letters {
						raw := make([]byte, len(filler)/2)
						_, _ = rand.Read(raw)
						hex.Encode(filler, raw)
					}
					if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic,
						Value: []byte(fmt.Sprintf(`{"i":%d,"pad":"%s"}`, j, filler))}).FirstErr(); err != nil {
						b.Fatal(err)
					}
				}
				for g, bd := range builds {
					cfgPath := writeConfig(b, cluster, fmt.Sprintf("group: rss-%d", g), benchConfig())
					start := time.Now()
					peak := runMeasuringRSS(b, exec.Command(bd.bin, "run", "--config", cfgPath, "--exit-when-idle", "1s"))
					b.ReportMetric(1100e6/1e6/(time.Since(start)-time.Second).Seconds(), bd.name+"-MB/s")
					b.ReportMetric(float64(peak)/(1<<20), bd.name+"-peak-RSS-MiB")
				}
			}
		})
	}
}

// runMeasuringRSS runs cmd and returns its peak resident memory, the
// kernel's high-water mark (VmHWM) read from /proc every 10ms until it
// exits. getrusage's ru_maxrss cannot be used: Go starts children with
// vfork, and Linux carries the parent's high-water mark over the exec
// into the child's, so it reported this process (Kafka's 1 GiB backlog
// included), not tracelake.
func runMeasuringRSS(b *testing.B, cmd *exec.Cmd) int64 {
	b.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("%v\n%s", err, out.String())
			}
			return peak
		case <-tick.C:
			peak = max(peak, highWaterMark(cmd.Process.Pid))
		}
	}
}

// highWaterMark is the VmHWM of process pid in bytes, 0 once it is gone.
func highWaterMark(pid int) int64 {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
