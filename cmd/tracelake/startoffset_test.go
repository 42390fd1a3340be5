package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceNumbered produces n records numbered from first ({"n": i}) to
// each of testTopic's two partitions of cluster.
func produceNumbered(t *testing.T, cluster *kfake.Cluster, first, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := first; i < first+n; i++ {
		for p := range int32(2) {
			r := &kgo.Record{Topic: testTopic, Partition: p, Value: fmt.Appendf(nil, `{"n": %d}`, i)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// loadedOffsets returns "partition:first-last count" per partition of the
// raw table, and fails on an offset stored twice.
func loadedOffsets(t *testing.T, bin, cfgPath string) string {
	t.Helper()
	out, err := exec.Command(bin, "sql", "--config", cfgPath,
		`SELECT kpartition || ':' || min(koffset) || '-' || max(koffset) || ' ' || count(*) || ' ' || count(DISTINCT koffset) AS r FROM trace_raw GROUP BY kpartition ORDER BY kpartition`).CombinedOutput()
	if err != nil {
		t.Fatalf("sql: %v\n%s", err, out)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		if f[1] != f[2] {
			t.Fatalf("offsets stored twice: %s", line)
		}
		rows = append(rows, f[0]+" "+f[1])
	}
	return strings.Join(rows, ", ")
}

// start_offset applies only to a partition with neither a committed
// offset nor ledger rows: earliest loads from the log start, latest from
// the end as it was when the run started (records produced after the start
// are loaded). Ledger rows and committed offsets win over both. Before,
// latest took the reset value handed to the offset-adjust callback (a
// timestamp) for an offset: every record was dropped as already batched,
// nothing was loaded or committed and verify said OK.
func TestStartOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	const before, after = 30, 20 // records per partition before the run starts and while it runs
	cases := []struct {
		start, state string
		want         string // per partition: first-last loaded offset, count
	}{
		{"earliest", "fresh", "0:0-49 50, 1:0-49 50"},
		{"latest", "fresh", "0:30-49 20, 1:30-49 20"},
		// The ledger (a first run of another group loaded offsets 0-29).
		{"earliest", "ledger", "0:0-49 50, 1:0-49 50"},
		{"latest", "ledger", "0:0-49 50, 1:0-49 50"},
		// Offsets committed at 10 by a tool, no ledger rows.
		{"earliest", "committed", "0:10-49 40, 1:10-49 40"},
		{"latest", "committed", "0:10-49 40, 1:10-49 40"},
	}
	for _, c := range cases {
		t.Run(c.start+"/"+c.state, func(t *testing.T) {
			cluster, cl := startKafka(t, 2)
			produceNumbered(t, cluster, 0, before)
			cfgPath := writeConfig(t, cluster, "group: g, start_offset: "+c.start, "batch: {max_interval: 200ms}\nload: {max_interval: 200ms}")
			switch c.state {
			case "ledger":
				// Same DuckDB file, another group.
				first := filepath.Join(t.TempDir(), "first.yaml")
				data, err := os.ReadFile(cfgPath)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(first, []byte(strings.Replace(string(data), "group: g, start_offset: "+c.start, "group: first", 1)), 0o644); err != nil {
					t.Fatal(err)
				}
				runUntilIdle(t, bin, first)
			case "committed":
				offsets := kadm.Offsets{}
				offsets.Add(kadm.Offset{Topic: testTopic, Partition: 0, At: 10, LeaderEpoch: -1})
				offsets.Add(kadm.Offset{Topic: testTopic, Partition: 1, At: 10, LeaderEpoch: -1})
				if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "g", offsets); err != nil {
					t.Fatal(err)
				}
			}
			run := startRun(t, bin, cfgPath, "run")
			produceNumbered(t, cluster, before, after)
			// Wait until the group's committed offsets reach the end.
			adm := kadm.NewClient(cl)
			deadline := time.Now().Add(60 * time.Second)
			for {
				resp, err := adm.FetchOffsets(context.Background(), "g")
				o0, _ := resp.Lookup(testTopic, 0)
				o1, _ := resp.Lookup(testTopic, 1)
				if err == nil && o0.At == before+after && o1.At == before+after {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("committed offsets %d, %d after 60s; want %d:\n%s", o0.At, o1.At, before+after, run.log)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := run.cmd.Wait(); err != nil {
				t.Fatalf("exit: %v\n%s", err, run.log)
			}
			if got := loadedOffsets(t, bin, cfgPath); got != c.want {
				t.Errorf("loaded %q, want %q", got, c.want)
			}
		})
	}
}

// consumedTotal reads the records a run has read from its /metrics.
var consumedTotal = regexp.MustCompile(`(?m)^tracelake_consumed_records_total\{[^}]*\} (\d+)`)

// start_offset latest under SIGKILL: a run is killed as soon as it has
// read the records produced after its assignment, well within a second of
// it, before any load and any commit of its loader. Before, where it
// started reading lived only in the loader's next offset commit (about a
// second later): the next run, finding no position, started at the end as
// it was then, and the records in between were skipped, counted by verify
// as skipped on purpose. Now the start is committed before the partition
// is read, and every record from it loads.
func TestStartOffsetLatestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	const before, after, later = 30, 5, 7 // records per partition: before the first run, read by it, after it
	cluster, _ := startKafka(t, 2)
	produceNumbered(t, cluster, 0, before)
	cfgPath := writeConfig(t, cluster, "group: g, start_offset: latest", "batch: {max_interval: 1h}\nload: {max_interval: 1h}")

	run := startRun(t, bin, cfgPath, "run killed")
	produceNumbered(t, cluster, before, after)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := consumedTotal.FindStringSubmatch(run.get("/metrics"))
		if m != nil && m[1] == strconv.Itoa(2*after) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not read the %d records produced after its start within 30s\n%s", 2*after, run.log)
		}
		time.Sleep(5 * time.Millisecond) // polling the child's metrics
	}
	if err := run.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = run.cmd.Wait()

	produceNumbered(t, cluster, before+after, later)
	rep := runUntilIdle(t, bin, cfgPath)
	if want := fmt.Sprintf("0:%d-%d %d, 1:%d-%d %d", before, before+after+later-1, after+later, before, before+after+later-1, after+later); loadedOffsets(t, bin, cfgPath) != want {
		t.Errorf("loaded %q, want %q: every record from where the killed run started", loadedOffsets(t, bin, cfgPath), want)
	}
	for _, p := range rep.Partitions {
		if p.Skipped != before || !rep.OK {
			t.Errorf("partition %d: verify ok=%v, %d skipped on purpose, want %d (those before the first start)", p.Partition, rep.OK, p.Skipped, before)
		}
	}
}
