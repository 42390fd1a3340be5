package loki

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// t0 is the time of the test records: 2026-12-01T10:00:00Z.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// record is a log record of the test lake.
type record struct {
	tenant   string
	resource map[string]string
	at       time.Duration // after t0
	severity plog.SeverityNumber
	text     string
	body     string
	attrs    map[string]any
	// observedOnly: the record has no time, only an observed time.
	observedOnly bool
}

// lakeRecords are two tenants' records. Tenant a: checkout (in
// namespace prod) with a plain line, a JSON line and a logfmt line, the
// plain one loaded twice (a client's retry), and search; tenant b:
// billing in namespace secret-ns, whose values tenant a must never see.
var lakeRecords = []record{
	{tenant: "a", resource: map[string]string{"service.name": "checkout", "k8s.namespace.name": "prod", "host.name": "h1"},
		at: time.Second + 123, severity: plog.SeverityNumberInfo, text: "INFO", body: "GET /cart status=200 duration=12ms",
		attrs: map[string]any{"http.method": "GET"}},
	{tenant: "a", resource: map[string]string{"service.name": "checkout", "k8s.namespace.name": "prod", "host.name": "h1"},
		at: 2 * time.Second, severity: plog.SeverityNumberError, text: "ERROR",
		body: `{"level":"error","msg":"payment failed","status":502,"user":{"id":"u1"},"took":"250ms"}`},
	{tenant: "a", resource: map[string]string{"service.name": "checkout", "k8s.namespace.name": "prod", "host.name": "h1"},
		at: 3 * time.Second, severity: plog.SeverityNumberWarn, text: "WARN", body: `level=warn msg="slow query" took=1.5s rows=42`},
	{tenant: "a", resource: map[string]string{"service.name": "search"},
		at: 4 * time.Second, severity: plog.SeverityNumberInfo, body: "found 10 results"},
	{tenant: "b", resource: map[string]string{"service.name": "billing", "k8s.namespace.name": "secret-ns"},
		at: 2 * time.Second, severity: plog.SeverityNumberError, body: "secret-b payment failed"},
}

// message is an OTLP logs message of one record.
func message(t testing.TB, r record) []byte {
	t.Helper()
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	// In key order, so that a record sent twice is the same bytes, as
	// a client's retry is.
	for _, k := range slices.Sorted(maps.Keys(r.resource)) {
		rl.Resource().Attributes().PutStr(k, r.resource[k])
	}
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	if r.observedOnly {
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(t0.Add(r.at)))
	} else {
		lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(r.at)))
	}
	lr.SetSeverityNumber(r.severity)
	lr.SetSeverityText(r.text)
	lr.Body().SetStr(r.body)
	if err := lr.Attributes().FromRaw(r.attrs); err != nil {
		t.Fatal(err)
	}
	v, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// lake is a DuckDB sink's database holding records, loaded as the
// pipeline loads them (the OTLP decoder, the tenant from a header), and
// a read path over it.
type lake struct {
	sink   *duckdb.Sink
	dec    *otel.Decoder
	reader *query.DuckDB
	next   int64
}

func newLake(t testing.TB) *lake {
	t.Helper()
	dir := t.TempDir()
	s, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "lake.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: otel.Logs.Name, Typed: &otel.Logs, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, err := otel.NewDecoder(otel.SignalLogs, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "a"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := query.NewDuckDB(context.Background(), s.DB(), query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &lake{sink: s, dec: d, reader: r}
}

// load loads messages of tenants in one load.
func (l *lake) load(t testing.TB, tenants []string, values [][]byte) {
	t.Helper()
	b := &sink.Batch{}
	first := l.next
	var rows int64
	for i, v := range values {
		rec := &kgo.Record{Topic: "otlp", Offset: l.next, Value: v, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(tenants[i])}}}
		n, err := l.dec.AppendRows(b, rec)
		if err != nil {
			t.Fatal(err)
		}
		rows += int64(n)
		l.next++
	}
	b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "otlp"}, First: first, Last: l.next - 1, Records: rows}}
	ctx := context.Background()
	f, err := l.sink.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.sink.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
}

// server serves the Loki API over a lake holding lakeRecords (the first
// loaded twice); the tenant is X-Scope-OrgID's, required.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	return serverOf(t, append([]record{lakeRecords[0]}, lakeRecords...))
}

// serverOf serves the Loki API over a lake holding records.
func serverOf(t *testing.T, records []record) *httptest.Server {
	t.Helper()
	return serverWith(t, records, tenancy.Resolver{Required: true})
}

// serveLogs serves the Loki API over a lake holding ld, one OTLP
// message of tenant a.
func serveLogs(t *testing.T, ld plog.Logs) *httptest.Server {
	t.Helper()
	value, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	l := newLake(t)
	l.load(t, []string{"a"}, [][]byte{value})
	return serveLake(t, l)
}

// serveLake serves the Loki API over l's table.
func serveLake(t *testing.T, l *lake) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	if err := Register(mux, Options{Reader: l.reader, Tenants: tenancy.Resolver{Required: true}, Version: "test", Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// serverWith serves the Loki API over a lake holding records, deciding
// tenants by tenants.
func serverWith(t *testing.T, records []record, tenants tenancy.Resolver) *httptest.Server {
	t.Helper()
	l := newLake(t)
	var of []string
	var msgs [][]byte
	for _, r := range records {
		of = append(of, r.tenant)
		msgs = append(msgs, message(t, r))
	}
	l.load(t, of, msgs)
	mux := http.NewServeMux()
	if err := Register(mux, Options{Reader: l.reader, Tenants: tenants, Version: "test", Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// get requests path with params as tenant ("" for none) and returns the
// status and body.
func get(t *testing.T, srv *httptest.Server, tenant, path string, params url.Values, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// ok is get expecting 200.
func ok(t *testing.T, srv *httptest.Server, tenant, path string, params url.Values, header ...string) []byte {
	t.Helper()
	status, body := get(t, srv, tenant, path, params, header...)
	if status != http.StatusOK {
		t.Fatalf("%s %v: %d %s", path, params, status, body)
	}
	return body
}

// window is the query range over the records.
func window(q string, more ...string) url.Values {
	v := url.Values{"query": {q}, "start": {ns(t0)}, "end": {ns(t0.Add(time.Minute))}}
	for i := 0; i+1 < len(more); i += 2 {
		v.Set(more[i], more[i+1])
	}
	return v
}

func ns(t time.Time) string { return jsonNumber(t.UnixNano()) }

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return strings.TrimSpace(string(b))
}
