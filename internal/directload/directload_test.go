package directload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// Requests arriving while a load runs are decoded meanwhile and share the
// next load, each answered after the load holding it committed; every span is stored once and the
// ledger covers positions 0..n-1 without a gap or an overlap.
func TestRequestsShareLoads(t *testing.T) {
	f := newFixture(t)
	gate := make(chan struct{})
	f.sink.beforeLoad = func(n int) {
		if n == 1 {
			<-gate // the first load waits until the others queue behind it
		}
	}
	l := f.start(0)
	const requests = 20
	bodies, spans := requestBodies(t, requests)
	errs := make(chan error, requests)
	go func() { errs <- forward(l, bodies[0]) }()
	waitFor(t, func() bool { return f.sink.loads.Load() == 1 })
	var wg sync.WaitGroup
	for _, b := range bodies[1:] {
		wg.Go(func() { errs <- forward(l, b) })
	}
	waitFor(t, func() bool { return f.decoded.Load() == requests }) // the others decoded while the first loads
	close(gate)
	wg.Wait()
	for range requests {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := f.sink.loads.Load(); n != 2 {
		t.Errorf("%d loads for %d requests, want 2: the first, then the %d that waited for it", n, requests, requests-1)
	}
	f.checkStored(t, spans, spans, requests)
	if n := f.count(t, "SELECT count(*) FROM otel_spans WHERE tenant_id <> 'team-a'"); n != 0 {
		t.Errorf("%d spans of another tenant", n)
	}
}

// The sequence resumes from the ledger: a loader started again goes on
// after the last position loaded, never over it.
func TestResumesFromTheLedger(t *testing.T) {
	f := newFixture(t)
	bodies, spans := requestBodies(t, 4)
	l := f.start(0)
	f.forward(t, l, bodies[:2]...)
	l.Close()
	l = f.start(0)
	if p := l.Snapshot().Partitions[0]; p.Next != 2 || p.HWM != 2 {
		t.Errorf("restarted at %d (given %d), want the ledger's 2", p.Next, p.HWM)
	}
	f.forward(t, l, bodies[2:]...)
	f.checkStored(t, spans, spans, 4)
	// The status page's view: requests and rows since this start, the
	// sequence loaded up to its last position.
	snap := l.Snapshot()
	if p := snap.Partitions[0]; p.Topic != "otlp:traces" || p.Next != 4 || p.HWM != 4 || p.LastLoad.IsZero() ||
		snap.Consumed != 2 || snap.Loaded != int64(spansIn(t, bodies[2])+spansIn(t, bodies[3])) {
		t.Errorf("snapshot %+v", snap)
	}
}

// A load that fails answers its requests with an error, and the client's
// retry and the next request land without a gap and without reusing the
// positions of a load that did commit (its reply lost): with those, the
// fence would leave their rows out. A load that committed, its reply
// lost, is tried again with the same staged rows, and that attempt finds
// its positions in the ledger as its own load's: its request is answered
// stored, not refused (its client's retry would store it twice). Either
// way each span is stored once.
func TestAFailedLoadIsAnsweredAndNotReused(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(map[bool]string{false: "failed", true: "reply lost"}[lost], func(t *testing.T) {
			f := newFixture(t)
			bodies, spans := requestBodies(t, 3)
			if lost {
				f.sink.afterLoad = func(n int) error {
					if n == 2 {
						return errors.New("connection reset")
					}
					return nil
				}
			} else {
				f.sink.failLoad = func(n int) error { // every attempt of the second load
					if n >= 2 && n < 2+LoadAttempts {
						return errors.New("connection reset")
					}
					return nil
				}
			}
			l := f.start(0)
			f.forward(t, l, bodies[0])
			err := forward(l, bodies[1])
			switch {
			case lost && err != nil:
				t.Fatalf("the request of a load that committed (its reply lost) was answered %v", err)
			case lost:
				f.forward(t, l, bodies[2])
			case err == nil:
				t.Fatal("the request of a failed load was answered OK")
			default:
				f.forward(t, l, bodies[1], bodies[2]) // the client's retry, and the next
			}
			f.checkStored(t, spans, spans, 3)
		})
	}
}

// A load that fails once is tried again with the same staged rows before
// its requests are answered: they are answered OK and stored once.
func TestAFailedLoadIsTriedAgainBeforeItIsAnswered(t *testing.T) {
	f := newFixture(t)
	bodies, spans := requestBodies(t, 3)
	f.sink.failLoad = func(n int) error {
		if n == 2 || n == 3 {
			return errors.New("connection reset")
		}
		return nil
	}
	l := f.start(0)
	f.forward(t, l, bodies...)
	if got := f.sink.loads.Load(); got != 5 {
		t.Errorf("%d loads, want 5: three requests, the second's tried three times", got)
	}
	f.checkStored(t, spans, spans, 3)
}

// A load that fails while the next requests wait, decoded at the
// positions after it: they are decoded again at the positions the ledger
// gives (the failed load's, as it did not commit), so the ledger has no
// gap where the failed load was.
func TestRequestsDecodedBehindAFailedLoadMoveUp(t *testing.T) {
	f := newFixture(t)
	gate := make(chan struct{})
	f.sink.beforeLoad = func(n int) {
		if n == 1 {
			<-gate
		}
	}
	f.sink.failLoad = func(n int) error {
		if n <= LoadAttempts {
			return errors.New("disk full")
		}
		return nil
	}
	l := f.start(0)
	bodies, spans := requestBodies(t, 6)
	first := make(chan error, 1)
	go func() { first <- forward(l, bodies[0]) }()
	waitFor(t, func() bool { return f.sink.loads.Load() == 1 })
	errs := make(chan error, 5)
	for _, b := range bodies[1:] {
		go func() { errs <- forward(l, b) }()
	}
	waitFor(t, func() bool { return f.decoded.Load() == 6 })
	close(gate)
	if err := <-first; err == nil {
		t.Fatal("the request of a failed load was answered OK")
	}
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	f.forward(t, l, bodies[0]) // the client's retry
	f.checkStored(t, spans, spans, 6)
}

// Two loaders with one instance (a misconfiguration): the second's
// positions are already in the ledger, its request is refused for a
// retry instead of stored under the other's positions or dropped by the
// fence, and the retry lands.
func TestOneInstanceTwiceIsCaught(t *testing.T) {
	f := newFixture(t)
	bodies, spans := requestBodies(t, 3)
	a, b := f.start(0), f.start(0) // both resume at 0
	f.forward(t, a, bodies[0], bodies[1])
	if err := forward(b, bodies[2]); err == nil {
		t.Fatal("a request loaded at positions another loader took was answered OK")
	}
	f.forward(t, b, bodies[2])
	f.checkStored(t, spans, spans, 3)
	if n := f.count(t, "SELECT count(*) FROM otel_spans_dlq"); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

// Two loaders with one instance, and a load of two requests fenced in
// part (the other loader committed the first's position while it waited):
// the request stored under this loader's own position is answered as
// stored, the fenced one told to retry, so every span is stored once, on
// a sink that moves its loaded range past the fence (DuckDB) and on one
// that reports the range as staged (Iceberg). Found by reviews: both were
// answered 503 and the stored one's retry stored it twice.
func TestAPartlyFencedLoadDoesNotDoubleTheStoredRequests(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *fixture{"duckdb": newFixture, "iceberg": newIcebergFixture} {
		t.Run(name, func(t *testing.T) {
			f := open(t)
			bodies, spans := requestBodies(t, 5)
			gate1, gate2 := make(chan struct{}), make(chan struct{})
			f.sink.beforeLoad = func(n int) {
				switch n {
				case 2:
					<-gate1 // b's first load (position 0, a's already) waits until b's next requests queue behind it
				case 3:
					<-gate2 // b's second load (positions 1-2) waits until a commits position 1
				}
			}
			a, b := f.start(0), f.start(0) // both resume at 0
			f.forward(t, a, bodies[0])     // load 1: a at position 0

			b0 := make(chan error, 1)
			go func() { b0 <- forward(b, bodies[1]) }() // load 2: b at position 0, held
			waitFor(t, func() bool { return f.sink.loads.Load() == 2 })
			type answer struct {
				body []byte
				err  error
			}
			b12 := make(chan answer, 2)
			for _, body := range bodies[2:4] {
				go func() { b12 <- answer{body, forward(b, body)} }()
			}
			waitFor(t, func() bool { return f.decoded.Load() == 4 }) // a's, b's held one and the two behind it
			close(gate1)
			if err := <-b0; err == nil {
				t.Fatal("a request loaded at a position a's load holds was answered OK")
			}
			// b resumes from the ledger at 1 and loads the two requests at
			// 1-2 (load 3, held); meanwhile a commits position 1 (load 4).
			waitFor(t, func() bool { return f.sink.loads.Load() == 3 })
			f.forward(t, a, bodies[4])
			close(gate2)
			// The clients retry every request answered with an error, as told.
			retry := [][]byte{bodies[1]}
			for range 2 {
				if a := <-b12; a.err != nil {
					retry = append(retry, a.body)
				}
			}
			if len(retry) != 2 {
				t.Errorf("%d of b's requests at positions 1-2 answered with an error, want 1 (the one fenced)", len(retry)-1)
			}
			f.forward(t, b, retry...)
			if n := f.rows(t); n != int64(spans) {
				t.Errorf("%d spans stored, want each of the %d once", n, spans)
			}
		})
	}
}

// newIcebergFixture is newFixture on the Iceberg sink (a SQLite catalog
// and a local warehouse).
func newIcebergFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := iceberg.Open(context.Background(), iceberg.Options{Table: otel.Spans.Name, Typed: &otel.Spans,
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fixture{sink: &countingSink{Sink: s}, rows: func(t *testing.T) int64 {
		stored, err := s.Stored(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, offsets := range stored {
			n += offsets.Count()
		}
		return n
	}}
}

type fixture struct {
	db      *sql.DB
	sink    *countingSink
	decoded atomic.Int64             // requests decoded by the fixture's loaders
	rows    func(t *testing.T) int64 // the spans stored
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "t.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: "otel_spans", Typed: &otel.Spans})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: s.DB(), sink: &countingSink{Sink: s}}
	f.rows = func(t *testing.T) int64 { return f.count(t, "SELECT count(*) FROM otel_spans") }
	return f
}

func (f *fixture) start(partition int32) *Loader {
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		panic(err)
	}
	l, err := Start(context.Background(), Options{Sink: f.sink, Decoder: countingDecoder{dec, &f.decoded}, Signal: otel.SignalTraces,
		Partition: partition, MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
	if err != nil {
		panic(err)
	}
	return l
}

func (f *fixture) forward(t *testing.T, l *Loader, bodies ...[]byte) {
	t.Helper()
	for _, b := range bodies {
		if err := forward(l, b); err != nil {
			t.Fatal(err)
		}
	}
}

// forward hands l a request of team-a's and returns its answer.
func forward(l *Loader, body []byte) error {
	_, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", body)
	return err
}

func (f *fixture) count(t *testing.T, q string) int64 {
	t.Helper()
	var n int64
	if err := f.db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkStored checks that the table holds rows spans of which distinct
// are distinct, and that the ledger covers 0..requests-1 once.
func (f *fixture) checkStored(t *testing.T, distinct, rows, requests int) {
	t.Helper()
	if n, d := f.count(t, "SELECT count(*) FROM otel_spans"), f.count(t, "SELECT count(DISTINCT span_id) FROM otel_spans"); n != int64(rows) || d != int64(distinct) {
		t.Errorf("%d spans (%d distinct), want %d (%d distinct)", n, d, rows, distinct)
	}
	var first, last, ranges, covered int64
	if err := f.db.QueryRow(`SELECT min(first_offset), max(last_offset), count(*), sum(last_offset - first_offset + 1)
		FROM otel_spans_ledger WHERE topic = 'otlp:traces'`).Scan(&first, &last, &ranges, &covered); err != nil {
		t.Fatal(err)
	}
	if first != 0 || last != int64(requests-1) || covered != int64(requests) {
		t.Errorf("the ledger covers %d-%d with %d positions in %d ranges, want 0-%d once", first, last, covered, ranges, requests-1)
	}
}

// requestBodies makes n export requests in protobuf and counts their spans.
func requestBodies(t *testing.T, n int) ([][]byte, int) {
	t.Helper()
	g := tracegen.New(7)
	var out [][]byte
	spans := 0
	for range n {
		td := g.OTLPTrace()
		spans += td.SpanCount()
		b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out, spans
}

// spansIn counts the spans of a request.
func spansIn(t *testing.T, body []byte) int {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	if err != nil {
		t.Fatal(err)
	}
	return td.SpanCount()
}

// countingDecoder counts the requests decoded.
type countingDecoder struct {
	RowDecoder
	n *atomic.Int64
}

func (d countingDecoder) AppendRows(b *sink.Batch, r *kgo.Record) (int, error) {
	d.n.Add(1)
	return d.RowDecoder.AppendRows(b, r)
}

// countingSink counts loads and injects faults around them.
type countingSink struct {
	sink.Sink
	loads      atomic.Int64
	beforeLoad func(n int)
	failLoad   func(n int) error // fails the load before it runs
	afterLoad  func(n int) error // fails the load after it committed
}

func (s *countingSink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	n := int(s.loads.Add(1))
	if s.beforeLoad != nil {
		s.beforeLoad(n)
	}
	if s.failLoad != nil {
		if err := s.failLoad(n); err != nil {
			return sink.Loaded{}, fmt.Errorf("injected: %w", err)
		}
	}
	loaded, err := s.Sink.Load(ctx, files)
	if err == nil && s.afterLoad != nil {
		if err := s.afterLoad(n); err != nil {
			return sink.Loaded{}, fmt.Errorf("injected: %w", err)
		}
	}
	return loaded, err
}

// LoadedAs passes sink.LoadFinder through.
func (s *countingSink) LoadedAs(ctx context.Context, loadID string) ([]sink.Range, error) {
	if f, ok := s.Sink.(sink.LoadFinder); ok {
		return f.LoadedAs(ctx, loadID)
	}
	return nil, nil
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
	}
}

// The OpenTelemetry Go SDK's OTLP/HTTP exporter against the receiver in
// load mode while the sink fails its first loads: the failed requests are
// answered 503 with Retry-After, the exporter retries them, and every span
// is stored once.
func TestSDKExporterRetriesWhileTheSinkFails(t *testing.T) {
	f := newFixture(t)
	f.sink.failLoad = func(n int) error {
		if n <= 2*LoadAttempts { // the first two loads, every attempt
			return errors.New("the sink is down")
		}
		return nil
	}
	l := f.start(0)
	defer l.Close()
	r, err := otlp.Start(otlp.Options{HTTP: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: 64 << 20, DefaultTenant: "default",
		RetryAfter: 50 * time.Millisecond, Forward: l, Signals: []string{otel.SignalTraces}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(r.Addr["http"]), otlptracehttp.WithInsecure(),
		otlptracehttp.WithHeaders(map[string]string{"X-Scope-OrgID": "team-a"}),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: 200 * time.Millisecond, MaxElapsedTime: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(40)))
	const spans = 200
	for i := range spans {
		_, s := tp.Tracer("tracelake.test").Start(ctx, "chat")
		s.SetAttributes(attribute.Int("i", i))
		s.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("the exporter gave up: %v", err)
	}
	if n := f.sink.loads.Load(); n < 3 {
		t.Fatalf("%d loads: the failing ones were not retried", n)
	}
	if n, d := f.count(t, "SELECT count(*) FROM otel_spans"), f.count(t, "SELECT count(DISTINCT span_attributes->>'$.i') FROM otel_spans WHERE tenant_id = 'team-a'"); n != spans || d != spans {
		t.Fatalf("%d spans stored (%d distinct of team-a), want %d once", n, d, spans)
	}
}

// refusingDecoder refuses every request, as the decoder of a newer check
// might refuse one the receivers accepted.
type refusingDecoder struct{}

func (refusingDecoder) AppendRows(*sink.Batch, *kgo.Record) (int, error) {
	return 0, errors.New("refused by the decoder")
}

// A request the decoder refuses is dead-lettered with its tenant (the
// record's header, as the pipeline's record_metadata holds it) and its
// time. Before, the dead letter held the body alone: its tenant was gone.
func TestDeadLetterKeepsTheRequestsTenant(t *testing.T) {
	f := newFixture(t)
	l, err := Start(context.Background(), Options{Sink: f.sink, Decoder: refusingDecoder{}, Signal: otel.SignalTraces,
		MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	bodies, _ := requestBodies(t, 1)
	before := time.Now().UTC().Truncate(time.Millisecond)
	stored, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", bodies[0])
	if err != nil || !stored.All {
		t.Fatalf("forward: %+v, %v; want the request dead-lettered", stored, err)
	}
	var headers string
	var created time.Time
	if err := f.db.QueryRow(`SELECT headers::VARCHAR, create_time FROM otel_spans_dlq`).Scan(&headers, &created); err != nil {
		t.Fatalf("the dead letter's headers and time: %v", err)
	}
	if want := `[{"key":"` + TenantHeader + `","value":"team-a"}]`; headers != want {
		t.Errorf("headers %s, want %s", headers, want)
	}
	if created.Before(before) || created.After(time.Now()) {
		t.Errorf("create_time %v, want the request's time (after %v)", created, before)
	}
}
