package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
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
	// the rest) still loads what it has, so under a loaded machine one or
	// two more are small; without the fix most loads were.
	var small int
	for _, records := range loads.records {
		if records*size < perLoad {
			small++
		}
	}
	if small > max(cfg.Workers, len(loads.records)/4) {
		t.Errorf("%d of %d loads below load.max_bytes (%d KiB of %d KiB records), want at most a quarter; records a load: %v",
			small, len(loads.records), perLoad>>10, size>>10, loads.records)
	}
}
