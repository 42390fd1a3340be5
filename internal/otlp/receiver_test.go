package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// forwarded is a Forwarder that keeps what it is given; the first fail
// calls fail, block (if not nil) holds each call until closed, and the
// others return answer.
type forwarded struct {
	mu     sync.Mutex
	fail   int
	calls  int
	block  chan struct{}
	answer Stored
	got    []forwardCall
}

type forwardCall struct {
	signal, tenant string
	body           []byte
}

func (f *forwarded) Forward(_ context.Context, signal, tenant string, body []byte) (Stored, error) {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.fail {
		return Stored{}, errors.New("broker unavailable")
	}
	f.got = append(f.got, forwardCall{signal, tenant, bytes.Clone(body)})
	return f.answer, nil
}

func (f *forwarded) stored() []forwardCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]forwardCall(nil), f.got...)
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, fwd Forwarder, edit func(*Options)) *Receivers {
	t.Helper()
	opt := Options{HTTP: "127.0.0.1:0", GRPC: "127.0.0.1:0", MaxBodyBytes: 1 << 20, MaxInflightBytes: 64 << 20,
		DefaultTenant: "default", RetryAfter: time.Second, Forward: fwd, Log: discardLog()}
	if edit != nil {
		edit(&opt)
	}
	r, err := Start(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return r
}

// rowsOf decodes forwarded requests into otel_spans rows, as the consumer
// of the forward topic will.
func rowsOf(t *testing.T, calls []forwardCall) []string {
	t.Helper()
	d, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, c := range calls {
		var out sink.Batch
		if _, err := d.AppendRows(&out, &kgo.Record{Value: c.body, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(c.tenant)}}}); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, strings.Split(strings.TrimSpace(string(out.Rows)), "\n")...)
	}
	return rows
}

// The OpenTelemetry Go SDK's OTLP/HTTP and OTLP/gRPC exporters send spans;
// each is answered only after its forward, retries while the forward fails
// (503 with Retry-After, Unavailable with RetryInfo) and every span arrives
// once with its attributes' types and its tenant.
func TestSDKExportersRetryUntilForwarded(t *testing.T) {
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			fwd := &forwarded{fail: 2}
			r := start(t, fwd, nil)
			ctx := context.Background()
			headers := map[string]string{"X-Scope-OrgID": "team-a"}
			var exp sdktrace.SpanExporter
			var err error
			if proto == "http" {
				exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(r.Addr["http"]), otlptracehttp.WithInsecure(),
					otlptracehttp.WithHeaders(headers), otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
					otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: time.Minute}))
			} else {
				exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(r.Addr["grpc"]), otlptracegrpc.WithInsecure(),
					otlptracegrpc.WithHeaders(map[string]string{"x-scope-orgid": "team-a"}), otlptracegrpc.WithCompressor("gzip"),
					otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: time.Minute}))
			}
			if err != nil {
				t.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(50)))
			tr := tp.Tracer("tracelake.test")
			const spans = 120
			for i := range spans {
				_, s := tr.Start(ctx, "chat")
				s.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", 1<<53+1), attribute.Float64("gen_ai.request.temperature", 0.5),
					attribute.Bool("stream", true), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}), attribute.Int("i", i))
				s.End()
			}
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatalf("the exporter gave up: %v", err)
			}
			calls := fwd.stored()
			rows := rowsOf(t, calls)
			if len(rows) != spans {
				t.Fatalf("%d spans forwarded, want %d", len(rows), spans)
			}
			seen := map[string]bool{}
			for _, row := range rows {
				for _, want := range []string{`"tenant_id":"team-a"`, `"gen_ai.usage.input_tokens":9007199254740993`,
					`"gen_ai.request.temperature":0.5`, `"stream":true`, `"gen_ai.response.finish_reasons":["stop"]`} {
					if !strings.Contains(row, want) {
						t.Fatalf("row lacks %s: %s", want, row)
					}
				}
				i := row[strings.Index(row, `"i":`):]
				i = i[:strings.IndexAny(i, ",}")]
				if seen[i] {
					t.Fatalf("span %s forwarded twice", i)
				}
				seen[i] = true
			}
			if fwd.calls < 3 {
				t.Fatalf("%d forward calls: the failing ones were not retried", fwd.calls)
			}
		})
	}
}

func post(t *testing.T, r *Receivers, path, ctype, encoding string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+r.Addr["http"]+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func traceRequest(t *testing.T, spans int) (protoBody, jsonBody []byte) {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := range spans {
		s := ss.Spans().AppendEmpty()
		s.SetName("s")
		s.SetSpanID([8]byte{byte(i + 1)})
		s.SetTraceID([16]byte{1})
	}
	req := ptraceotlp.NewExportRequestFromTraces(td)
	p, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	j, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return p, j
}

// Each refusal the OTLP/HTTP specification names, with its status, a
// google.rpc.Status body in the request's encoding, and Retry-After where
// the client should retry; what is refused is never forwarded.
func TestHTTPAnswers(t *testing.T) {
	pb, js := traceRequest(t, 3)
	var gz, zs bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(pb)
	_ = zw.Close()
	ze, _ := zstd.NewWriter(&zs)
	_, _ = ze.Write(pb)
	_ = ze.Close()

	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# test tokens\nsecret-a team-a\nsecret-all *\nsecret-reader read=team-a\nsecret-writer read=team-a write=team-b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) {
		var err error
		if o.Tokens, err = tenancy.LoadTokens(tokens, o.Log); err != nil {
			t.Fatal(err)
		}
		o.MaxBodyBytes = 4096
	})
	auth := func(token, tenant string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + token, "X-Scope-OrgID": tenant}
	}
	for _, c := range []struct {
		name, path, ctype, enc string
		body                   []byte
		header                 map[string]string
		status                 int
		code                   codes.Code
		forwards               int
	}{
		{"protobuf", "/v1/traces", contentProto, "", pb, auth("secret-a", "team-a"), 200, 0, 1},
		{"JSON", "/v1/traces", contentJSON, "", js, auth("secret-a", "team-a"), 200, 0, 1},
		{"gzip", "/v1/traces", contentProto, "gzip", gz.Bytes(), auth("secret-all", "team-b"), 200, 0, 1},
		{"zstd", "/v1/traces", contentProto, "zstd", zs.Bytes(), auth("secret-all", "team-b"), 200, 0, 1},
		{"not OTLP", "/v1/traces", contentProto, "", []byte("\xff\xff not protobuf"), auth("secret-a", "team-a"), 400, codes.InvalidArgument, 0},
		{"bad logs JSON", "/v1/logs", contentJSON, "", []byte(`{"resourceLogs":"x"}`), auth("secret-a", "team-a"), 400, codes.InvalidArgument, 0},
		// The decode error quotes the bytes, not UTF-8: the Status did not
		// marshal, and the 400 came with an empty body.
		{"JSON not UTF-8", "/v1/traces", contentJSON, "", []byte("\xff\xfe"), auth("secret-a", "team-a"), 400, codes.InvalidArgument, 0},
		{"too large", "/v1/traces", contentProto, "", make([]byte, 5000), auth("secret-a", "team-a"), 413, codes.ResourceExhausted, 0},
		{"too large once decompressed", "/v1/traces", contentProto, "gzip", gzipOf(make([]byte, 5000)), auth("secret-a", "team-a"), 413, codes.ResourceExhausted, 0},
		// Every 4xx carries a Status (protobuf where the encoding is not
		// known); this one came as plain text.
		{"unknown content type", "/v1/traces", "text/plain", "", pb, auth("secret-a", "team-a"), 415, codes.InvalidArgument, 0},
		{"no token", "/v1/traces", contentProto, "", pb, map[string]string{"X-Scope-OrgID": "team-a"}, 401, codes.Unauthenticated, 0},
		{"wrong token", "/v1/traces", contentProto, "", pb, auth("guess", "team-a"), 401, codes.Unauthenticated, 0},
		{"another tenant", "/v1/traces", contentProto, "", pb, auth("secret-a", "team-b"), 403, codes.PermissionDenied, 0},
		{"a token that only reads", "/v1/traces", contentProto, "", pb, auth("secret-reader", "team-a"), 403, codes.PermissionDenied, 0},
		{"a tenant the token reads, not writes", "/v1/traces", contentProto, "", pb, auth("secret-writer", "team-a"), 403, codes.PermissionDenied, 0},
		{"bad tenant", "/v1/traces", contentProto, "", pb, auth("secret-all", "a/b"), 400, codes.InvalidArgument, 0},
		// Authentication schemes are case-insensitive (RFC 9110 11.1).
		{"bearer in lower case", "/v1/traces", contentProto, "", pb, map[string]string{"Authorization": "bearer secret-a", "X-Scope-OrgID": "team-a"}, 200, 0, 1},
	} {
		before := len(fwd.stored())
		resp, out := post(t, r, c.path, c.ctype, c.enc, c.body, c.header)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, out)
			continue
		}
		if n := len(fwd.stored()) - before; n != c.forwards {
			t.Errorf("%s: %d forwards, want %d", c.name, n, c.forwards)
		}
		switch {
		case c.status == 200 && c.ctype == contentJSON:
			if resp.Header.Get("Content-Type") != contentJSON || !bytes.HasPrefix(out, []byte("{")) {
				t.Errorf("%s: answered %s %q, want JSON", c.name, resp.Header.Get("Content-Type"), out)
			}
		case c.status >= 400 && c.code != 0:
			var st spb.Status
			unmarshal := proto.Unmarshal
			if c.ctype == contentJSON {
				unmarshal = protojson.Unmarshal
			}
			if err := unmarshal(out, &st); err != nil || codes.Code(st.Code) != c.code || st.Message == "" {
				t.Errorf("%s: body %q is not a Status with code %v (%v)", c.name, out, c.code, err)
			}
		}
	}
	if got := fwd.stored(); got[0].tenant != "team-a" || got[2].tenant != "team-b" || got[0].signal != Traces {
		t.Errorf("forwarded %+v", got[:3])
	}
	// A JSON request is forwarded as protobuf.
	if got := fwd.stored()[1]; !bytes.Equal(got.body, pb) {
		t.Errorf("the JSON request was forwarded as %q, want its protobuf", got.body)
	}
	resp, err := http.Get("http://" + r.Addr["http"] + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var st spb.Status
	if err := proto.Unmarshal(out, &st); resp.StatusCode != http.StatusMethodNotAllowed || err != nil || st.Message == "" {
		t.Errorf("GET: %d, body %q (%v); want 405 with a Status", resp.StatusCode, out, err)
	}
}

func gzipOf(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// A request alone always goes, however large: an OTLP/JSON request whose
// body fits max_inflight_bytes but whose body and protobuf copy together
// do not was told 429 on every retry, nothing else being in flight, until
// its client gave up (found by a review: the copy was held as if of
// another request).
func TestALoneJSONRequestGoes(t *testing.T) {
	pb, js := traceRequest(t, 200)
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.MaxInflightBytes = int64(len(js) + len(pb)/2) })
	for range 3 {
		resp, out := post(t, r, "/v1/traces", contentJSON, "", js, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a lone JSON request of %d bytes (protobuf %d, max_inflight_bytes %d): %d %s",
				len(js), len(pb), len(js)+len(pb)/2, resp.StatusCode, out)
		}
	}
	if n := len(fwd.stored()); n != 3 {
		t.Fatalf("%d requests forwarded, want 3", n)
	}
	if n := r.inflight.Load(); n != 0 {
		t.Errorf("%d bytes still held after the requests", n)
	}
}

// Backpressure and faults: 429 past max in-flight bytes, 503 when the
// forward fails, both with Retry-After; gRPC Unavailable with RetryInfo;
// 401 / Unauthenticated without a required tenant.
func TestRetryableAnswers(t *testing.T) {
	pb, _ := traceRequest(t, 2)
	hdr := map[string]string{"X-Scope-OrgID": "t"}
	// One request held in its forward takes the whole budget of bytes,
	// or of requests: the next is told to come back.
	for _, limit := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"bytes", func(o *Options) { o.MaxInflightBytes = int64(len(pb)) }, "max_inflight_bytes"},
		{"requests", func(o *Options) { o.MaxConcurrent = 1 }, "max_concurrent_requests"},
	} {
		held := &forwarded{block: make(chan struct{})}
		r := start(t, held, limit.set)
		first := make(chan int)
		go func() {
			resp, _ := post(t, r, "/v1/traces", contentProto, "", pb, hdr)
			first <- resp.StatusCode
		}()
		deadline := time.Now().Add(10 * time.Second)
		for r.inflight.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the first request never started forwarding")
			}
			time.Sleep(time.Millisecond) // polling a condition: the receiver's in-flight bytes
		}
		resp, body := post(t, r, "/v1/traces", contentProto, "", pb, hdr)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !bytes.Contains(body, []byte(limit.want)) {
			t.Errorf("over the %s bound: %d, Retry-After %q, %q; want 429, 1, %s", limit.name, resp.StatusCode, resp.Header.Get("Retry-After"), body, limit.want)
		}
		close(held.block)
		if s := <-first; s != 200 {
			t.Errorf("the first request: %d", s)
		}
	}
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.TenantRequired = true })
	fwd.fail = fwd.calls + 1
	resp, _ := post(t, r, "/v1/traces", contentProto, "", pb, hdr)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("forward failing: %d, Retry-After %q; want 503, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, _ = post(t, r, "/v1/traces", contentProto, "", pb, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no tenant: %d, want 401", resp.StatusCode)
	}

	client := ptraceotlp.NewGRPCClient(grpcConn(t, r))
	req := exportRequest(t, pb)
	if _, err := client.Export(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC without a tenant: %v, want Unauthenticated", err)
	}
	fwd.fail = fwd.calls + 1
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t")
	_, err := client.Export(ctx, req)
	st := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if st.Code() != codes.Unavailable || retry == nil || retry.RetryDelay.AsDuration() != time.Second {
		t.Errorf("gRPC with the forward failing: %v (retry info %v), want Unavailable with a 1s RetryInfo", err, retry)
	}
	if _, err := client.Export(ctx, req); err != nil {
		t.Errorf("gRPC once the forward works: %v", err)
	}
}

// The OpenTelemetry Go SDK's OTLP/HTTP log exporter: log records arrive
// as logs, with their body, severity and typed attributes.
func TestSDKLogExporter(t *testing.T) {
	fwd := &forwarded{}
	r := start(t, fwd, nil)
	ctx := context.Background()
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(r.Addr["http"]), otlploghttp.WithInsecure(),
		otlploghttp.WithHeaders(map[string]string{"X-Scope-OrgID": "team-logs"}))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)))
	logger := lp.Logger("tracelake.test")
	const records = 30
	for i := range records {
		var rec otellog.Record
		rec.SetBody(attribute.StringValue("tool timed out"))
		rec.SetSeverity(otellog.SeverityWarn)
		rec.SetTimestamp(time.Unix(1_796_040_000, int64(i)))
		rec.AddAttributes(attribute.Int("attempt", i), attribute.Bool("retry", true), attribute.Float64("backoff_s", 1.5))
		logger.Emit(ctx, rec)
	}
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := otel.NewDecoder(otel.SignalLogs, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, c := range fwd.stored() {
		if c.signal != Logs || c.tenant != "team-logs" {
			t.Fatalf("forwarded as %s for %s", c.signal, c.tenant)
		}
		var out sink.Batch
		if _, err := d.AppendRows(&out, &kgo.Record{Value: c.body, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(c.tenant)}}}); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, strings.Split(strings.TrimSpace(string(out.Rows)), "\n")...)
	}
	if len(rows) != records {
		t.Fatalf("%d log records forwarded, want %d", len(rows), records)
	}
	for _, want := range []string{`"body":"tool timed out"`, `"severity_number":13`, `"retry":true`, `"backoff_s":1.5`, `"attempt":7`, `"tenant_id":"team-logs"`} {
		if !strings.Contains(strings.Join(rows, "\n"), want) {
			t.Errorf("no row has %s:\n%s", want, rows[0])
		}
	}
}

// Retry-After is whole seconds (RFC 9110 delay-seconds): a delay under a
// second was sent as 0, asking clients to retry at once. It is rounded up,
// at least 1; gRPC's RetryInfo keeps the delay exact.
func TestRetryAfterRoundsUp(t *testing.T) {
	f := func(d time.Duration, want string) {
		t.Helper()
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%s) = %s, want %s", d, got, want)
		}
	}
	f(time.Nanosecond, "1")
	f(300*time.Millisecond, "1")
	f(time.Second, "1")
	f(1200*time.Millisecond, "2")
	f(5*time.Second, "5")

	pb, _ := traceRequest(t, 1)
	fwd := &forwarded{fail: 2}
	r := start(t, fwd, func(o *Options) { o.RetryAfter = 300 * time.Millisecond })
	resp, _ := post(t, r, "/v1/traces", contentProto, "", pb, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("forward failing: %d, Retry-After %q; want 503, 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	req := exportRequest(t, pb)
	_, err := ptraceotlp.NewGRPCClient(dial(t, r)).Export(context.Background(), req)
	st := status.Convert(err)
	var delay time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			delay = ri.RetryDelay.AsDuration()
		}
	}
	if st.Code() != codes.Unavailable || delay != 300*time.Millisecond {
		t.Errorf("gRPC with the forward failing: %v, RetryInfo %s; want Unavailable, 300ms", err, delay)
	}
}
