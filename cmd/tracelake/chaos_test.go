package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// txnProducer produces transactions of 40 records to testTopic until
// stopped, aborting every fifth; each value says which it was.
type txnProducer struct {
	mu        sync.Mutex
	committed map[string]bool // values of committed transactions
	aborted   int
	stop      chan struct{}
	done      chan error
}

func startTxnProducer(t *testing.T, cluster *kfake.Cluster) *txnProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.TransactionalID("chaos"),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p := &txnProducer{committed: map[string]bool{}, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		ctx := context.Background()
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				p.done <- nil
				return
			default:
			}
			abort := n%5 == 4
			if err := cl.BeginTransaction(); err != nil {
				p.done <- err
				return
			}
			var values []string
			for i := range 40 {
				v := fmt.Sprintf(`{"txn":%d,"i":%d,"aborted":%v}`, n, i, abort)
				values = append(values, v)
				cl.Produce(ctx, &kgo.Record{Topic: testTopic, Value: []byte(v)}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				p.done <- err
				return
			}
			end := kgo.TryCommit
			if abort {
				end = kgo.TryAbort
			}
			if err := cl.EndTransaction(ctx, end); err != nil {
				p.done <- err
				return
			}
			p.mu.Lock()
			if abort {
				p.aborted += len(values)
			} else {
				for _, v := range values {
					p.committed[v] = true
				}
			}
			p.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return p
}

// finish stops the producer after its transaction in progress.
func (p *txnProducer) finish(t *testing.T) {
	t.Helper()
	close(p.stop)
	if err := <-p.done; err != nil {
		t.Fatalf("transactional producer: %v", err)
	}
}

// churn starts and stops `tracelake run` processes in slots for d: every
// 0.5-2 s a slot's process is stopped with SIGTERM (or, once, killed -9),
// or an empty slot is started. At half time the topic gets two more
// partitions.
func churn(t *testing.T, bin, cfgPath string, slots int, d time.Duration, cl *kgo.Client) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("churn from seed %d", seed)
	procs := make([]*exec.Cmd, slots)
	stopProc := func(i int, sig syscall.Signal) {
		if err := procs[i].Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- procs[i].Wait() }()
		select {
		case err := <-done:
			if sig == syscall.SIGTERM && err != nil {
				// A stop that could not load in time exits 1; its records are
				// read again, which is what the run must survive.
				t.Logf("slot %d stopped with %v", i, err)
			}
		case <-time.After(60 * time.Second):
			_ = procs[i].Process.Kill()
			t.Fatalf("slot %d did not stop within 60s", i)
		}
		procs[i] = nil
	}
	// Mid-run, whatever the processes are doing then.
	grown := make(chan error, 1)
	time.AfterFunc(d/2, func() {
		_, err := kadm.NewClient(cl).CreatePartitions(context.Background(), 2, testTopic)
		grown <- err
	})
	killed := false
	start := time.Now()
	for time.Since(start) < d {
		i := rng.IntN(slots)
		switch {
		case procs[i] == nil:
			procs[i] = exec.Command(bin, "run", "--config", cfgPath)
			procs[i].Stderr = &childLog{t: t, prefix: fmt.Sprintf("slot %d: ", i), assigned: make(chan struct{}, 1)}
			if err := procs[i].Start(); err != nil {
				t.Fatal(err)
			}
		case !killed && rng.IntN(3) == 0:
			stopProc(i, syscall.SIGKILL)
			killed = true
		default:
			stopProc(i, syscall.SIGTERM)
		}
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
	}
	for i := range procs {
		if procs[i] != nil {
			if !killed {
				stopProc(i, syscall.SIGKILL)
				killed = true
				continue
			}
			stopProc(i, syscall.SIGTERM)
		}
	}
	if err := <-grown; err != nil {
		t.Fatalf("add partitions: %v", err)
	}
}

// Chaos: processes of one group started and stopped every few seconds, one
// killed -9, partitions added mid-run, a transactional producer aborting
// every fifth transaction. At the end an independent count: every
// committed record exactly once in raw ∪ dead letters, no aborted record,
// verify exit 0. Three processes share a Databend (the test server), three
// an Iceberg table on a PostgreSQL catalog, and one DuckDB process is
// restarted and killed.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	const settings = `workers: 2
batch: {max_records: 300, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
shutdown_timeout: 20s`
	kafkaSettings := "group: chaos, session_timeout: 6s, rebalance_timeout: 6s, metadata_refresh: 1s"

	t.Run("three processes on Databend", func(t *testing.T) {
		srv := databendtest.New("cloudapp", "s3cret")
		t.Cleanup(srv.Close)
		cfgPath, prod := churnThree(t, bin, fmt.Sprintf("type: databend, databend: {dsn: %q}", srv.DSN("")), kafkaSettings, settings)
		partitionOffsets(t, srv) // fails on an offset stored twice
		got := map[string]int{}
		for _, r := range srv.Rows("trace_raw") {
			var v json.RawMessage
			if err := json.Unmarshal(r["raw_data"], &v); err != nil {
				t.Fatal(err)
			}
			got[compactJSON(t, v)]++
		}
		checkChaos(t, prod, got, len(srv.Rows("trace_raw_dlq")))
		verifyJSON(t, bin, cfgPath, 0)
	})

	t.Run("three processes on Iceberg", func(t *testing.T) {
		url := icebergtest.StartPostgres(t)
		warehouse := filepath.Join(t.TempDir(), "warehouse")
		// Iceberg loads at its commit_interval, and refuses load.max_interval.
		icebergSettings := strings.Replace(settings, "load: {max_files: 3, max_interval: 100ms}", "load: {max_files: 3}", 1)
		cfgPath, prod := churnThree(t, bin, fmt.Sprintf("type: iceberg, iceberg: {catalog: %q, warehouse: %q, commit_interval: 300ms}", url, warehouse), kafkaSettings, icebergSettings)
		rep := verifyJSON(t, bin, cfgPath, 0) // markers and aborted records are no gaps
		_, dlq := rep.Totals()
		checkChaos(t, prod, loadedValues(t, bin, cfgPath), int(dlq))
	})

	t.Run("one DuckDB process", func(t *testing.T) {
		cluster, cl := startKafka(t, 4)
		cfgPath := writeConfig(t, cluster, kafkaSettings, settings)
		prod := startTxnProducer(t, cluster)
		churn(t, bin, cfgPath, 1, 16*time.Second, cl)
		prod.finish(t)
		rep := runUntilIdle(t, bin, cfgPath)
		if !rep.OK {
			t.Errorf("verify: %v", rep.Problems)
		}
		got := loadedValues(t, bin, cfgPath)
		_, dlq := rep.Totals()
		checkChaos(t, prod, got, int(dlq))
	})
}

// churnThree runs three processes of one group on the sink under churn
// while a transactional producer writes, then a final run to the end; it
// returns the config and the producer's account.
func churnThree(t *testing.T, bin, sinkYAML, kafkaSettings, settings string) (string, *txnProducer) {
	t.Helper()
	cluster, cl := startKafka(t, 4)
	cfgPath := filepath.Join(t.TempDir(), "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], %s}\n%s\nsink: {%s}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
		cluster.ListenAddrs()[0], testTopic, kafkaSettings, settings, sinkYAML)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prod := startTxnProducer(t, cluster)
	churn(t, bin, cfgPath, 3, 24*time.Second, cl)
	prod.finish(t)
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	return cfgPath, prod
}

// loadedValues counts the raw table's values, read with `tracelake sql`.
func loadedValues(t *testing.T, bin, cfgPath string) map[string]int {
	t.Helper()
	out, err := exec.Command(bin, "sql", "--config", cfgPath, `SELECT raw_data::VARCHAR FROM trace_raw`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range lines[1 : len(lines)-1] { // header and row count
		got[compactJSON(t, json.RawMessage(strings.TrimSpace(line)))]++
	}
	return got
}

// checkChaos compares the loaded values with what the producer committed.
func checkChaos(t *testing.T, prod *txnProducer, got map[string]int, dlq int) {
	t.Helper()
	prod.mu.Lock()
	defer prod.mu.Unlock()
	if dlq != 0 {
		t.Errorf("%d dead letters; every value is JSON", dlq)
	}
	missing, twice, aborted := 0, 0, 0
	for v := range prod.committed {
		switch got[v] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	for v := range got {
		if strings.Contains(v, `"aborted":true`) {
			aborted++
		}
	}
	if missing > 0 || twice > 0 || aborted > 0 || len(got) != len(prod.committed) {
		t.Errorf("of %d committed records: %d missing, %d loaded twice; %d aborted records loaded (of %d); %d distinct loaded",
			len(prod.committed), missing, twice, aborted, prod.aborted, len(got))
	}
	if len(prod.committed) < 1000 || prod.aborted == 0 {
		t.Errorf("the producer committed %d and aborted %d records: too few to say anything", len(prod.committed), prod.aborted)
	}
}

// compactJSON is v without insignificant space, as the producer wrote it.
func compactJSON(t *testing.T, v json.RawMessage) string {
	t.Helper()
	var m struct {
		Txn     int  `json:"txn"`
		I       int  `json:"i"`
		Aborted bool `json:"aborted"`
	}
	if err := json.Unmarshal(v, &m); err != nil {
		t.Fatalf("loaded value %s: %v", v, err)
	}
	return `{"txn":` + strconv.Itoa(m.Txn) + `,"i":` + strconv.Itoa(m.I) + `,"aborted":` + strconv.FormatBool(m.Aborted) + `}`
}
