package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
)

// downSink never loads, as a database that is down.
type downSink struct{ sink.Sink }

func (downSink) Load(context.Context, []sink.File) (sink.Loaded, error) {
	return sink.Loaded{}, errors.New("injected: database down")
}

// await polls cond until it holds, failing after 30s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// Lag, committed offset, freshness and DLQ metrics against known offsets and
// timestamps: while the sink is down the lag is the whole partition; once
// loaded it is 0, the committed offset is the end, and every stored
// record's freshness is at least its known age.
func TestMetricsAgainstKnownOffsets(t *testing.T) {
	const n = 50
	c := newCluster(t, 1)
	cl := producer(t, c)
	created := time.Now().Add(-time.Hour)
	for i := range n {
		v := []byte(fmt.Sprintf(`{"n":%d}`, i))
		if i == n-1 {
			v = []byte("not json")
		}
		produce(t, cl, &kgo.Record{Topic: topic, Value: v, Timestamp: created})
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	s := openSink(t, cfg)

	run := func(snk sink.Sink, m *obs.Metrics) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- pipeline.Run(ctx, context.Background(), cfg, snk, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t), Metrics: m})
		}()
		return func() { cancel(); <-done }
	}
	lag := func(m *obs.Metrics) float64 { return testutil.ToFloat64(m.Lag.WithLabelValues(topic, "0")) }

	down := obs.New()
	stop := run(downSink{s}, down)
	await(t, "all records consumed", func() bool { return testutil.ToFloat64(down.ConsumedRecords.WithLabelValues(topic)) == n })
	await(t, "lag = whole partition", func() bool { return lag(down) == n })
	if got := testutil.ToFloat64(down.InflightBytes); got <= 0 {
		t.Errorf("in-flight bytes = %v while nothing loads", got)
	}
	stop()
	if got := testutil.ToFloat64(down.Retries.WithLabelValues("load")); got < 1 {
		t.Errorf("load retries = %v", got)
	}

	up := obs.New()
	stop = run(s, up)
	await(t, "everything loaded", func() bool { return testutil.ToFloat64(up.Committed.WithLabelValues(topic, "0")) == n })
	if got := lag(up); got != 0 {
		t.Errorf("lag after loading = %v, want 0", got)
	}
	if got := testutil.ToFloat64(up.InflightBytes); got != 0 {
		t.Errorf("in-flight bytes after loading = %v, want 0", got)
	}
	if got := testutil.ToFloat64(up.DLQRecords.WithLabelValues("invalid_json")); got != 1 {
		t.Errorf("DLQ invalid_json = %v, want 1", got)
	}
	stop()

	mfs, err := up.Registry.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "tracelake_freshness_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != n-1 || h.GetSampleSum() < float64(n-1)*3600 {
			t.Errorf("freshness: %d samples, sum %.0fs; want %d samples of at least 3600s", h.GetSampleCount(), h.GetSampleSum(), n-1)
		}
		return
	}
	t.Error("no freshness histogram")
}

// fatalSink fails every load with an error retrying cannot fix.
type fatalSink struct{ sink.Sink }

func (fatalSink) Load(context.Context, []sink.File) (sink.Loaded, error) {
	return sink.Loaded{}, fmt.Errorf("injected: database invalidated: %w", sink.ErrFatal)
}

// A fatal sink error stops the run at once, without retrying and without
// committing anything; the error says to restart.
func TestFatalSinkErrorStopsRun(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c)
	for i := range 100 {
		produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stats := &pipeline.Stats{}
	err := pipeline.Run(ctx, context.Background(), cfg, fatalSink{s}, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats})
	if ctx.Err() != nil {
		t.Fatal("the run went on after a fatal sink error")
	}
	if !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "restart tracelake") {
		t.Fatalf("run error = %v", err)
	}
	if n := stats.Retries.Load(); n != 0 {
		t.Errorf("%d retries of a fatal error", n)
	}
	committed, cerr := kadm.NewClient(cl).FetchOffsets(context.Background(), cfg.Kafka.Group)
	must(t, cerr)
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			t.Errorf("offset committed after a fatal error: %s/%d at %d", o.Topic, o.Partition, o.At)
		}
	})
}

// tracelake_consumed_bytes_total counts what was read from Kafka: each
// record's key, value and headers, as the batch budget does (a value-only
// count hid records whose keys or headers are most of their size).
func TestConsumedBytesCountKeyValueAndHeaders(t *testing.T) {
	const n = 5
	c := newCluster(t, 1)
	cl := producer(t, c)
	want := 0.0
	for i := range n {
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(strings.Repeat("x", 100))}}}
		want += float64(len(r.Key) + len(r.Value) + len("traceparent") + 100)
		produce(t, cl, r)
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	m := obs.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, downSink{openSink(t, cfg)}, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t), Metrics: m})
	}()
	await(t, "all records consumed", func() bool { return testutil.ToFloat64(m.ConsumedRecords.WithLabelValues(topic)) == n })
	cancel()
	<-done // the run's counting is over
	if got := testutil.ToFloat64(m.ConsumedBytes.WithLabelValues(topic)); got != want {
		t.Errorf("consumed bytes = %v, want %v (keys, values and headers)", got, want)
	}
}
