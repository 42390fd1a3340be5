package tempo

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// decodeTraceV1 decodes a v1 protobuf answer as Grafana's datasource does
// (pkg/tsdb/tempo/trace.go: ptrace.ProtoUnmarshaler over the body).
func decodeTraceV1(t *testing.T, body []byte) ptrace.Traces {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	if err != nil {
		t.Fatalf("decode trace: %v", err)
	}
	return td
}

// traceByIDResponse is tempopb.TraceByIDResponse's fields Grafana reads.
type traceByIDResponse struct {
	trace   ptrace.Traces
	status  uint64
	message string
}

// decodeTraceV2 reads tempopb.TraceByIDResponse: field 1 the Trace (read
// as OTLP, wire-compatible), 3 the status, 4 the message.
func decodeTraceV2(t *testing.T, body []byte) traceByIDResponse {
	t.Helper()
	out := traceByIDResponse{trace: ptrace.NewTraces()}
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			t.Fatal("bad tag")
		}
		body = body[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(body)
			out.trace = decodeTraceV1(t, v)
			body = body[n:]
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			out.status = v
			body = body[n:]
		case num == 4 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(body)
			out.message = string(v)
			body = body[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, body)
			body = body[n:]
		}
	}
	return out
}

// spanSummary lists a trace's spans as "service/name" sorted, with
// their ids, kinds, start and end.
func spanSummary(td ptrace.Traces) []string {
	var out []string
	for _, rs := range td.ResourceSpans().All() {
		svc, _ := rs.Resource().Attributes().Get("service.name")
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				out = append(out, fmt.Sprintf("%s/%s %s<-%s %s %d+%d", svc.Str(), s.Name(), s.SpanID(), s.ParentSpanID(),
					s.Kind(), s.StartTimestamp(), s.EndTimestamp()-s.StartTimestamp()))
			}
		}
	}
	slices.Sort(out)
	return out
}

func wantSpans(spans []span) []string {
	var out []string
	for _, s := range spans {
		parent := s.parent
		if parent == "" {
			parent = ""
		}
		out = append(out, fmt.Sprintf("%s/%s %s<-%s %s %d+%d", s.service, s.name, s.id, parent,
			s.kind, base.Add(s.start).UnixNano(), s.dur.Nanoseconds()))
	}
	slices.Sort(out)
	return out
}

// TestTraceByIDProtobuf: v1 and v2 answer tenant a's trace as Grafana
// decodes it, every span once (the pay trace was loaded twice), times in
// exact nanoseconds, with attributes typed, events and links; tenant b's
// span of the same trace id is not in it.
func TestTraceByIDProtobuf(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		id   string
		want []span
	}{{traceCheckout, tenantA[:3]}, {tracePay, tenantA[3:]}, {strings.TrimLeft(tracePay, "0"), tenantA[3:]}} {
		rec := f.get("a", "/api/traces/"+c.id, "application/protobuf")
		if rec.Code != 200 {
			t.Fatalf("v1 %s: %d %s", c.id, rec.Code, rec.Body)
		}
		if got, want := spanSummary(decodeTraceV1(t, rec.Body.Bytes())), wantSpans(c.want); !slices.Equal(got, want) {
			t.Fatalf("v1 %s:\n got %q\nwant %q", c.id, got, want)
		}
		rec = f.get("a", "/api/v2/traces/"+c.id, "application/protobuf")
		if rec.Code != 200 {
			t.Fatalf("v2 %s: %d %s", c.id, rec.Code, rec.Body)
		}
		v2 := decodeTraceV2(t, rec.Body.Bytes())
		if got, want := spanSummary(v2.trace), wantSpans(c.want); !slices.Equal(got, want) || v2.status != 0 {
			t.Fatalf("v2 %s: status %d\n got %q\nwant %q", c.id, v2.status, got, want)
		}
	}
	// One span in detail: attributes keep their types; the event and link.
	td := decodeTraceV1(t, f.get("a", "/api/traces/"+traceCheckout, "application/protobuf").Body.Bytes())
	var db ptrace.Span
	for _, rs := range td.ResourceSpans().All() {
		if h, _ := rs.Resource().Attributes().Get("host"); h.Str() != "h-"+rs.Resource().Attributes().AsRaw()["service.name"].(string) {
			t.Fatalf("resource %v", rs.Resource().Attributes().AsRaw())
		}
		for _, ss := range rs.ScopeSpans().All() {
			if ss.Scope().Name() != "tracelake-test" || ss.Scope().Version() != "1.0" {
				t.Fatalf("scope %s %s", ss.Scope().Name(), ss.Scope().Version())
			}
			for _, s := range ss.Spans().All() {
				if s.TraceID().String() != traceCheckout {
					t.Fatalf("span of trace %s", s.TraceID())
				}
				if s.Name() == "db query" {
					db = s
				}
			}
		}
	}
	if got := db.Attributes().AsRaw(); fmt.Sprint(got) != "map[db.system:postgres weight:1.5]" {
		t.Fatalf("attributes %v", got)
	}
	if db.Status().Code() != ptrace.StatusCodeError || db.Status().Message() != "failed" {
		t.Fatalf("status %v %q", db.Status().Code(), db.Status().Message())
	}
	if db.Events().Len() != 1 || db.Events().At(0).Name() != "retry" || db.Events().At(0).Attributes().AsRaw()["attempt"] != int64(2) ||
		db.Events().At(0).Timestamp().AsTime() != base.Add(101*time.Millisecond) {
		// The event's time as sent, to the nanosecond, as Tempo answers
		// it (base is not a whole microsecond): it was cut to the
		// microsecond.
		t.Fatalf("events %v", db.Events().At(0).Timestamp().AsTime())
	}
	if db.Links().Len() != 1 || db.Links().At(0).SpanID().String() != spanPay {
		t.Fatal("links")
	}
}

// TestTraceByIDNotFound: an unknown trace (or another tenant's) is 404
// in v1 and 200 with an empty trace in v2, as Tempo answers; a bad id is
// 400; no tenant is 401.
func TestTraceByIDNotFound(t *testing.T) {
	f := newFixture(t)
	if rec := f.get("a", "/api/traces/"+traceSecret, "application/protobuf"); rec.Code != 404 || rec.Body.Len() != 0 {
		t.Fatalf("v1 of tenant b's trace for a: %d %q", rec.Code, rec.Body)
	}
	rec := f.get("a", "/api/v2/traces/"+traceSecret, "application/protobuf")
	if rec.Code != 200 {
		t.Fatalf("v2: %d", rec.Code)
	}
	if v2 := decodeTraceV2(t, rec.Body.Bytes()); v2.trace.SpanCount() != 0 {
		t.Fatalf("v2 found %d spans", v2.trace.SpanCount())
	}
	if rec := f.get("a", "/api/v2/traces/"+traceSecret, ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"trace":{"resourceSpans":[]}`) {
		t.Fatalf("v2 JSON: %d %s", rec.Code, rec.Body)
	}
	if rec := f.get("b", "/api/traces/"+traceSecret, "application/protobuf"); rec.Code != 200 {
		t.Fatalf("tenant b's own trace: %d", rec.Code)
	}
	for _, p := range []string{"/api/traces/xyz", "/api/v2/traces/" + strings.Repeat("a", 33), "/api/traces/" + traceCheckout + "?start=10&end=5"} {
		if rec := f.get("a", p, ""); rec.Code != 400 {
			t.Fatalf("%s: %d", p, rec.Code)
		}
	}
	if rec := f.get("", "/api/traces/"+traceCheckout, ""); rec.Code != 401 {
		t.Fatalf("no tenant: %d", rec.Code)
	}
	// Tenant b reads only its span of the shared trace id.
	td := decodeTraceV1(t, f.get("b", "/api/traces/"+traceCheckout, "application/protobuf").Body.Bytes())
	if got, want := spanSummary(td), wantSpans(tenantB[:1]); !slices.Equal(got, want) {
		t.Fatalf("tenant b: %q", got)
	}
}

// TestTraceByIDWindow: Grafana's start and end (Unix seconds) find a
// trace that runs during them; a window the trace does not touch does not.
func TestTraceByIDWindow(t *testing.T) {
	f := newFixture(t)
	s := base.Unix()
	in := fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", tracePay, s+50, s+70)
	if got := decodeTraceV2(t, f.get("a", in, "application/protobuf").Body.Bytes()).trace.SpanCount(); got != 2 {
		t.Fatalf("inside the window: %d spans", got)
	}
	out := fmt.Sprintf("/api/traces/%s?start=%d&end=%d", tracePay, s-100, s-10)
	if rec := f.get("a", out, "application/protobuf"); rec.Code != 404 {
		t.Fatalf("outside the window: %d", rec.Code)
	}
	// Either bound alone is a window open on the other side (Tempo's
	// ParseTraceByIDRequest compares them only when both are set).
	for _, q := range []string{fmt.Sprintf("start=%d", s-10), fmt.Sprintf("end=%d", s+70)} {
		if rec := f.get("a", fmt.Sprintf("/api/traces/%s?%s", tracePay, q), "application/protobuf"); rec.Code != 200 {
			t.Fatalf("%s alone: %d, want the trace", q, rec.Code)
		}
	}
	if rec := f.get("a", fmt.Sprintf("/api/traces/%s?start=%d", tracePay, s+10000), "application/protobuf"); rec.Code != 404 {
		t.Fatalf("a start after the trace, alone: %d", rec.Code)
	}
}

// TestTraceByIDJSON: v1 JSON names the resource spans batches (Tempo's
// MarshalToJSONV1), v2 wraps the trace; ids are base64 and 64-bit
// integers strings (protobuf's JSON mapping, as jsonpb writes them).
func TestTraceByIDJSON(t *testing.T) {
	f := newFixture(t)
	var v1 struct {
		Batches []struct {
			ScopeSpans []struct {
				Spans []struct {
					SpanID            string `json:"spanId"`
					StartTimeUnixNano string `json:"startTimeUnixNano"`
					Kind              string `json:"kind"`
				} `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"batches"`
	}
	rec := f.get("a", "/api/traces/"+tracePay, "")
	if err := json.Unmarshal(rec.Body.Bytes(), &v1); err != nil || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%v %s", err, rec.Body)
	}
	var got []string
	for _, b := range v1.Batches {
		for _, ss := range b.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, s.SpanID+" "+s.StartTimeUnixNano+" "+s.Kind)
			}
		}
	}
	slices.Sort(got)
	want := []string{
		fmt.Sprintf("%s %d SPAN_KIND_SERVER", base64.StdEncoding.EncodeToString(idBytes(spanPay)), base.Add(time.Minute).UnixNano()),
		fmt.Sprintf("%s %d SPAN_KIND_CLIENT", base64.StdEncoding.EncodeToString(idBytes(spanPayDB)), base.Add(time.Minute+time.Millisecond).UnixNano()),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	var v2 struct {
		Trace struct {
			ResourceSpans []json.RawMessage `json:"resourceSpans"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(f.get("a", "/api/v2/traces/"+tracePay, "application/json").Body.Bytes(), &v2); err != nil || len(v2.Trace.ResourceSpans) != 2 {
		t.Fatalf("v2: %v %d", err, len(v2.Trace.ResourceSpans))
	}
}

// TestTraceByIDSpanCap: past the cap v1 answers 422 and v2 the first
// spans with status PARTIAL and a message, as Tempo past its max size.
func TestTraceByIDSpanCap(t *testing.T) {
	f := newFixtureCap(t, 2)
	if rec := f.get("a", "/api/traces/"+traceCheckout, "application/protobuf"); rec.Code != 422 {
		t.Fatalf("v1: %d", rec.Code)
	}
	v2 := decodeTraceV2(t, f.get("a", "/api/v2/traces/"+traceCheckout, "application/protobuf").Body.Bytes())
	if v2.status != 1 || v2.trace.SpanCount() != 2 || !strings.Contains(v2.message, "partial trace") {
		t.Fatalf("v2: status %d, %d spans, %q", v2.status, v2.trace.SpanCount(), v2.message)
	}
	if rec := f.get("a", "/api/v2/traces/"+traceCheckout, ""); !strings.Contains(rec.Body.String(), `"status":"PARTIAL"`) {
		t.Fatalf("v2 JSON: %s", rec.Body)
	}
	// Under the cap, complete.
	if v2 := decodeTraceV2(t, f.get("a", "/api/v2/traces/"+tracePay, "application/protobuf").Body.Bytes()); v2.status != 0 || v2.trace.SpanCount() != 2 {
		t.Fatalf("pay: status %d, %d spans", v2.status, v2.trace.SpanCount())
	}
}

// TestTraceByIDWindowOverlappingTheTrace: a window (Grafana's start and
// end) that begins while the trace is still running finds it, whole, as
// Tempo does: it reads the blocks whose time range, from their spans'
// starts to their ends, overlaps the window (tempodb/tempodb.go
// includeBlock) and answers every span of the trace in them. Bounding
// the spans' start by the window drops the spans started before it: here
// every span of the checkout trace (the root runs to base+2s), so the
// trace is not found at all.
func TestTraceByIDWindowOverlappingTheTrace(t *testing.T) {
	f := newFixture(t)
	s := base.Unix()
	path := fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", traceCheckout, s+1, s+60)
	rec := f.get("a", path, "application/protobuf")
	if got, want := spanSummary(decodeTraceV2(t, rec.Body.Bytes()).trace), wantSpans(tenantA[:3]); !slices.Equal(got, want) {
		t.Fatalf("window from base+1s (the root runs to base+2s): %d\n got %q\nwant %q", rec.Code, got, want)
	}
}

// TestTraceByIDRetryAcrossTheUpgradeKeepsNanoseconds: the pay trace is
// loaded twice; when the first copy was loaded before
// start_time_unix_nano existed (null: its start is the microsecond
// column's), the answer is still every span once at its exact
// nanosecond, from the copy that has it.
func TestTraceByIDRetryAcrossTheUpgradeKeepsNanoseconds(t *testing.T) {
	f := newFixture(t)
	if _, err := f.db.Exec(`UPDATE otel_spans SET start_time_unix_nano = NULL WHERE rowid IN
		(SELECT min(rowid) FROM otel_spans WHERE trace_id = ? GROUP BY span_id)`, tracePay); err != nil {
		t.Fatal(err)
	}
	rec := f.get("a", "/api/traces/"+tracePay, "application/protobuf")
	if got, want := spanSummary(decodeTraceV1(t, rec.Body.Bytes())), wantSpans(tenantA[3:]); !slices.Equal(got, want) {
		t.Fatalf("%d\n got %q\nwant %q", rec.Code, got, want)
	}
}

// TestTraceByIDWindowInAGapOfTheTrace: a window falling between two of
// a trace's spans (the trace runs from its first start to its last end
// around it) finds the trace, as Tempo does: the trace is in the blocks
// whose time range overlaps the window (tempodb/tempodb.go
// includeBlock), whether or not one of its spans runs during it.
func TestTraceByIDWindowInAGapOfTheTrace(t *testing.T) {
	f := newFixture(t)
	gap := "22222222222222222222222222222222"
	spans := []span{
		{gap, "40f067aa0ba902b7", "", "batch", "job", ptrace.SpanKindServer, ptrace.StatusCodeOk, 10 * time.Minute, time.Second, nil},
		{gap, "40f067aa0ba902b8", "40f067aa0ba902b7", "batch", "later step", ptrace.SpanKindInternal, ptrace.StatusCodeOk, 15 * time.Minute, time.Second, nil},
	}
	loadSpans(t, f.db, t.TempDir(), map[string][]ptrace.Traces{"a": {traces(spans)}})
	s := base.Unix()
	rec := f.get("a", fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", gap, s+12*60, s+13*60), "application/protobuf")
	if got, want := spanSummary(decodeTraceV2(t, rec.Body.Bytes()).trace), wantSpans(spans); !slices.Equal(got, want) {
		t.Fatalf("window between the trace's spans: %d\n got %q\nwant %q", rec.Code, got, want)
	}
}

// TestTraceByIDRetryAcrossTheEventUpgradeKeepsNanoseconds: a span sent
// once before event times were stored to the nanosecond (2026-12-07: its
// copy's event times end at the microsecond) and retried after it is
// answered once, with its event at the nanosecond sent, from the copy
// that has it, whichever copy the table holds first: the copies have the
// same start, and the one answered was the one read first.
func TestTraceByIDRetryAcrossTheEventUpgradeKeepsNanoseconds(t *testing.T) {
	for _, older := range []string{"min", "max"} {
		t.Run("older copy "+older, func(t *testing.T) {
			f := newFixtureOf(t, map[string][]ptrace.Traces{"a": {traces(tenantA[:3]), traces(tenantA[:3])}}, maxTraceSpans)
			// The older release's text: six digits of each event time.
			res, err := f.db.Exec(`UPDATE otel_spans SET events = regexp_replace(CAST(events AS VARCHAR), '(\.[0-9]{6})[0-9]{3}Z', '\1Z', 'g')::JSON
				WHERE rowid = (SELECT `+older+`(rowid) FROM otel_spans WHERE span_id = ?)`, spanDB)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("%d copies made older", n)
			}
			// Without a window and with one (Grafana's start and end: the
			// read is another query).
			s := base.Unix()
			windowed := decodeTraceV2(t, f.get("a", fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", traceCheckout, s, s+60), "application/protobuf").Body.Bytes()).trace
			for _, td := range []ptrace.Traces{decodeTraceV1(t, f.get("a", "/api/traces/"+traceCheckout, "application/protobuf").Body.Bytes()), windowed} {
				checkEventExact(t, td)
			}
		})
	}
}

// checkEventExact checks that td is the checkout trace, each span once,
// and that its db span's event is at the nanosecond sent.
func checkEventExact(t *testing.T, td ptrace.Traces) {
	t.Helper()
	if got, want := spanSummary(td), wantSpans(tenantA[:3]); !slices.Equal(got, want) {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if s.SpanID().String() != spanDB {
					continue
				}
				if s.Events().Len() != 1 || s.Events().At(0).Timestamp().AsTime() != base.Add(101*time.Millisecond) {
					t.Fatalf("event at %v, sent at %v", s.Events().At(0).Timestamp().AsTime(), base.Add(101*time.Millisecond))
				}
			}
		}
	}
}
