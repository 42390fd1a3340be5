package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// A backlog of 1 MiB messages many times max_inflight_bytes: the bytes read
// and not yet loaded never exceed the bound, fetching pauses, and every
// message is loaded exactly once.
func TestInflightBytesBounded(t *testing.T) {
	const n, size, bound = 48, 1 << 20, 8 << 20
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.ProducerBatchMaxBytes(4<<20), kgo.MaxBufferedBytes(64<<20))
	filler := bytes.Repeat([]byte("x"), size-32)
	for i := range n {
		produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, filler))})
	}
	cfg := testConfig(t, c)
	cfg.MaxInflightBytes = bound
	cfg.Kafka.FetchMaxBytes = 4 << 20
	cfg.Batch.MaxBytes = 64 << 20 // larger than the bound: only the bound closes batches
	cfg.Batch.MaxInterval = config.Duration(1e9 * 60)
	must(t, cfg.Validate())
	s := openSink(t, cfg)
	budget := pipeline.NewBudget(bound)
	m := obs.New()
	ctx := context.Background()
	must(t, pipeline.Run(ctx, ctx, cfg, s, pipeline.RunOptions{ExitWhenIdle: 300e6, RetryBase: 10e6, Log: testLog(t), Budget: budget, Metrics: m}))

	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	if p := budget.Peak(); p > bound || p < size {
		t.Errorf("peak in-flight bytes = %d, want between %d and %d", p, size, bound)
	}
	if testutil.ToFloat64(m.FetchPauses) == 0 {
		t.Error("fetching never paused")
	}
	t.Logf("peak in flight %.1f MiB of %d MiB, %v pauses", float64(budget.Peak())/(1<<20), bound>>20, testutil.ToFloat64(m.FetchPauses))
}

// With the sink slower than Kafka the budget is full nearly all the time.
// A worker that holds load.max_bytes outside its open batch has loads of
// that size coming: it must not cut its batch and ask for a load each time
// it waits for the budget, which made every load a fraction of
// load.max_bytes (and DuckDB's cost per row higher).
func TestLoadsKeepTheirSizeUnderBackpressure(t *testing.T) {
	const n, size, bound, perLoad = 1200, 10 << 10, 4 << 20, 1 << 20
	c := newCluster(t, 2)
	cl := producer(t, c)
	filler := bytes.Repeat([]byte("x"), size-len(`{"i":"0000","pad":""}`))
	for i := range n {
		produce(t, cl, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"i":"%04d","pad":"%s"}`, i, filler)})
	}
	cfg := testConfig(t, c)
	cfg.Workers = 2
	cfg.MaxInflightBytes = bound
	cfg.Kafka.FetchMaxBytes = 1 << 20
	cfg.Batch.MaxBytes = 256 << 10
	cfg.Batch.MaxRecords = n
	cfg.Batch.MaxInterval = config.Duration(time.Minute)
	cfg.Load.MaxBytes = perLoad
	cfg.Load.MaxFiles = 128
	cfg.Load.MaxInterval = config.Duration(time.Minute)
	must(t, cfg.Validate())
	s := openSink(t, cfg)
	loads := &loadSizeSink{Sink: s, delay: 20 * time.Millisecond} // the database is the bottleneck
	m := obs.New()
	ctx := context.Background()
	must(t, pipeline.Run(ctx, ctx, cfg, loads, pipeline.RunOptions{ExitWhenIdle: 300e6, RetryBase: 10e6, Log: testLog(t), Metrics: m}))

	if rows, dlq := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d (dead letters %d), want %d; loads %v", rows, dlq, n, loads.records)
	}
	if testutil.ToFloat64(m.FetchPauses) == 0 {
		t.Fatal("fetching never paused: the budget was not reached, nothing tested")
	}
	loads.mu.Lock()
	defer loads.mu.Unlock()
	// Each worker's last load is what it had left, and a worker that waits
	// for the budget while holding less than a load (its sibling holding
	// the rest) still loads what it has, so under a loaded machine a few
	// more are small (4 of 13 seen once in CI beside the other packages'
	// tests, 5 of 14 once beside a full test run); without the fix most
	// loads were (19-21 of 24): at most half passes.
	var small int
	for _, records := range loads.records {
		if records*size < perLoad {
			small++
		}
	}
	if small > max(cfg.Workers, len(loads.records)/2) {
		t.Errorf("%d of %d loads below load.max_bytes (%d KiB of %d KiB records), want at most half; records a load: %v",
			small, len(loads.records), perLoad>>10, size>>10, loads.records)
	}
}

// oneLoad is the config of one worker reading n spans produced to one
// partition, in two batches and one load (at the idle flush).
func oneLoad(t *testing.T, n int) *config.Config {
	c := newCluster(t, 1)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 1, nil))
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = n / 2
	cfg.Batch.MaxInterval = config.Duration(time.Minute)
	cfg.Load.MaxInterval = config.Duration(time.Minute)
	return cfg
}

// committingSink notes the bytes in flight just before and just after the
// pipeline's committing callback of each load.
type committingSink struct {
	*duckdb.Sink
	stats         *pipeline.Stats
	mu            sync.Mutex
	before, after []int64
}

func (c *committingSink) LoadReporting(ctx context.Context, files []sink.File, committing func()) (sink.Loaded, error) {
	return c.Sink.LoadReporting(ctx, files, func() {
		before := c.stats.Inflight.Load()
		committing()
		c.mu.Lock()
		c.before, c.after = append(c.before, before), append(c.after, c.stats.Inflight.Load())
		c.mu.Unlock()
	})
}

// With a sink that reports when only its commit is left (DuckDB), a load's
// bytes leave max_inflight_bytes then, not when the load returns: the
// worker reads its next records during the commit. Freed once: nothing is
// in flight at the end.
func TestBudgetFreedWhenTheCommitStarts(t *testing.T) {
	const n = 1000
	cfg := oneLoad(t, n)
	stats := &pipeline.Stats{}
	s := openSink(t, cfg)
	cs := &committingSink{Sink: s, stats: stats}
	runUntilIdle(t, cfg, cs, stats)

	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	if len(cs.before) != 1 {
		t.Fatalf("%d loads reported their commit, want 1", len(cs.before))
	}
	if cs.before[0] <= 0 || cs.after[0] != 0 {
		t.Errorf("in flight when the commit started: %d bytes, then %d; want all of them freed", cs.before[0], cs.after[0])
	}
	if got := stats.Inflight.Load(); got != 0 {
		t.Errorf("%d bytes in flight after the run, want 0", got)
	}
}

// failedCommitSink reports its first load's commit, then fails it (as a
// commit that ran out of disk would); the retry loads for real.
type failedCommitSink struct {
	*duckdb.Sink
	failed atomic.Bool
}

func (f *failedCommitSink) LoadReporting(ctx context.Context, files []sink.File, committing func()) (sink.Loaded, error) {
	if f.failed.CompareAndSwap(false, true) {
		committing()
		return sink.Loaded{}, errors.New("commit failed")
	}
	return f.Sink.LoadReporting(ctx, files, committing)
}

// A load whose commit fails after its bytes left the budget is retried
// with the same files, reporting its commit again: the bytes leave once
// (nothing in flight at the end, not less), and every record lands once.
func TestBudgetFreedOnceWhenACommitIsRetried(t *testing.T) {
	const n = 1000
	cfg := oneLoad(t, n)
	stats := &pipeline.Stats{}
	s := openSink(t, cfg)
	runUntilIdle(t, cfg, &failedCommitSink{Sink: s}, stats)

	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	if stats.Retries.Load() == 0 {
		t.Fatal("no load was retried: nothing tested")
	}
	if got := stats.Inflight.Load(); got != 0 {
		t.Errorf("%d bytes in flight after the run, want 0 (freed twice when negative)", got)
	}
}
