package tempo

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// startlessSpan is a span of the trace of startlessTraceID: start and
// end after base (hasStart/hasEnd false: sent as OTLP's 0).
type startlessSpan struct {
	id, name         string
	start, end       time.Duration
	hasStart, hasEnd bool
}

const startlessTraceID = "0000000000000000000000000000a5a5"

// startlessTenants are three tenants' spans of one trace id: tenant a's
// trace over two days with spans without a start ending inside, before
// and after the window around base, and one without a start or an end;
// tenant b's running five hours later, with a span of tenant a's root's
// id and spans without a start ending where a's trace runs; tenant c's
// of spans without a start alone.
var startlessTenants = map[string][]startlessSpan{
	"a": {
		{id: "a000000000000001", name: "a-root", start: 0, end: 2 * time.Second, hasStart: true, hasEnd: true},
		{id: "a000000000000002", name: "a-nextday", start: 24 * time.Hour, end: 24*time.Hour + time.Second, hasStart: true, hasEnd: true},
		{id: "a000000000000003", name: "a-nostart-inside", end: time.Second, hasEnd: true},
		{id: "a000000000000004", name: "a-nostart-before", end: -4 * time.Hour, hasEnd: true},
		{id: "a000000000000005", name: "a-nostart-after", end: 3 * time.Hour, hasEnd: true},
		{id: "a000000000000006", name: "a-timeless"},
		{id: "a000000000000007", name: "a-nostart-nextday", end: 24*time.Hour + 500*time.Millisecond, hasEnd: true},
	},
	"b": {
		{id: "b000000000000001", name: "b-root", start: 5 * time.Hour, end: 5*time.Hour + 2*time.Second, hasStart: true, hasEnd: true},
		{id: "a000000000000001", name: "b-same-id-as-a-root", start: 5*time.Hour + time.Second, end: 5*time.Hour + 1500*time.Millisecond, hasStart: true, hasEnd: true},
		{id: "b000000000000003", name: "b-nostart-in-a-window", end: time.Second, hasEnd: true},
		{id: "b000000000000004", name: "b-nostart-inside", end: 5*time.Hour + time.Second, hasEnd: true},
		{id: "b000000000000006", name: "b-timeless"},
	},
	"c": {
		{id: "c000000000000003", name: "c-nostart", end: time.Second, hasEnd: true},
		{id: "c000000000000006", name: "c-timeless"},
	},
}

func startlessTraces() map[string][]ptrace.Traces {
	out := map[string][]ptrace.Traces{}
	for tenant, spans := range startlessTenants {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc-"+tenant)
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for _, s := range spans {
			sp := ss.AppendEmpty()
			sp.SetTraceID(pcommon.TraceID(traceID(startlessTraceID)))
			sp.SetSpanID(pcommon.SpanID(spanID(s.id)))
			sp.SetName(s.name)
			if s.hasStart {
				sp.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(s.start)))
			}
			if s.hasEnd {
				sp.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(s.end)))
			}
		}
		out[tenant] = []ptrace.Traces{td}
	}
	return out
}

// expectedStartless is what Tempo's trace by id answers for tenant in
// the window [start, end] (Unix seconds, as parseTraceRequest reads
// them; windowed false: none), by the rule findTrace documents, computed
// here from the spans: spans starting within traceReach of the window,
// with those without a start ending from the reach's start on or not at
// all, answered when the spans with a start run during the window.
func expectedStartless(tenant string, windowed bool, start, end int64) []string {
	var out []string
	spans := startlessTenants[tenant]
	if !windowed {
		for _, s := range spans {
			out = append(out, s.name)
		}
		slices.Sort(out)
		return out
	}
	us := func(d time.Duration) int64 { return base.Add(d).UnixMicro() }
	startMicros, endMicros := start*1e6, (end+1)*1e6-1
	if end == 0 {
		endMicros = 1<<62 - 1
	}
	reach := traceReach.Microseconds()
	lo, hi := max(startMicros-reach, 1), min(endMicros, 1<<62-1-reach)+reach
	first, last := int64(1<<62), int64(-1)
	for _, s := range spans {
		switch {
		case s.hasStart:
			if at := us(s.start); at >= lo && at <= hi {
				out = append(out, s.name)
				first, last = min(first, at), max(last, us(s.end))
			}
		case !s.hasEnd || us(s.end) >= lo:
			out = append(out, s.name)
		}
	}
	if last < 0 || first > endMicros || last < startMicros {
		return nil
	}
	slices.Sort(out)
	return out
}

// A trace id several tenants sent spans of, some without a start (and
// some without an end either), over two days: each tenant's trace by id,
// with and without a window, a window's start or end alone, holds its own
// spans alone, those the window's rule keeps (the start-less branch
// reading no other tenant's, nor a span ending before the reach), on
// DuckDB and on Iceberg alike; a read of several tenants (a|b) is refused.
func TestTraceByIDOfATraceIDSeveralTenantsSentStartlessSpansOf(t *testing.T) {
	msgs := startlessTraces()
	f := newFixtureOf(t, msgs, maxTraceSpans)
	db, dir := openDB(t)
	loadSpans(t, db, dir, msgs)
	n := 0
	for _, s := range startlessTenants {
		n += len(s)
	}
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, n, 3, 1, openBenchSink(t, lake))
	ice := &fixture{t: t, db: db, mux: http.NewServeMux()}
	if _, err := register(ice.mux, Options{Reader: openBenchReader(t, lake, nil), Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, maxTraceSpans); err != nil {
		t.Fatal(err)
	}
	names := func(f *fixture, tenant, path string) []string {
		t.Helper()
		rec := f.get(tenant, path, "application/protobuf")
		if rec.Code != 200 {
			t.Fatalf("%s for %s: %d %s", path, tenant, rec.Code, rec.Body)
		}
		var out []string
		for _, rs := range decodeTraceV2(t, rec.Body.Bytes()).trace.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out = append(out, sp.Name())
				}
			}
		}
		slices.Sort(out)
		return out
	}
	bs := base.Unix()
	const h, d = 3600, 86400
	windows := [][2]int64{
		{bs - 10, bs + 10}, {bs + d - 10, bs + d + 10}, {bs - 2*h, bs - h - 100}, {bs - 1800, bs - 1200},
		{bs + 3*h - 10, bs + 3*h + 10}, {bs + 5*h - 5, bs + 5*h + 5}, {bs + d - 10, 0}, {bs + 4*h, 0},
		{0, bs + 10}, {0, bs - 3*h}, {bs - 2*d, bs + 2*d}, {bs - 30, bs - 5}, {bs + 2, bs + 3},
	}
	nonEmpty := 0
	for _, tenant := range []string{"a", "b", "c"} {
		for i := -1; i < len(windows); i++ {
			path, want := "/api/v2/traces/"+startlessTraceID, expectedStartless(tenant, false, 0, 0)
			if i >= 0 {
				w := windows[i]
				var q []string
				if w[0] != 0 {
					q = append(q, fmt.Sprintf("start=%d", w[0]))
				}
				if w[1] != 0 {
					q = append(q, fmt.Sprintf("end=%d", w[1]))
				}
				path += "?" + strings.Join(q, "&")
				want = expectedStartless(tenant, true, w[0], w[1])
			}
			if len(want) > 0 {
				nonEmpty++
			}
			for reader, f := range map[string]*fixture{"duckdb": f, "iceberg": ice} {
				got := names(f, tenant, path)
				for _, name := range got {
					if !strings.HasPrefix(name, tenant+"-") {
						t.Errorf("%s %s for tenant %s: span %q of another tenant", reader, path, tenant, name)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s %s for tenant %s: %q, want %q", reader, path, tenant, got, want)
				}
			}
		}
	}
	if nonEmpty < 10 {
		t.Fatalf("only %d answers expected non-empty: the windows test too little", nonEmpty)
	}
	// Searches in the same windows (their start-less branch reads from
	// the window's reach on): each tenant's own spans alone, both readers
	// alike, and tenant a's window around its trace finds its spans
	// without a start ending from the reach's start on (however long
	// after: their start is unknown) and without an end with it.
	for _, tenant := range []string{"a", "b", "c"} {
		for i := -1; i < len(windows); i++ {
			for _, q := range []string{"{}", `{ name =~ ".*nostart.*" || name =~ ".*timeless" }`, `{ name = "b-nostart-in-a-window" }`} {
				params := url.Values{"q": {q}, "spss": {"20"}, "limit": {"50"}}
				if i >= 0 {
					w := windows[i]
					if w[0] == 0 || w[1] == 0 {
						continue // a search's window has both
					}
					{
						params.Set("start", fmt.Sprint(w[0]))
						params.Set("end", fmt.Sprint(w[1]))
					}
				}
				duck, iceGot := matchedSpans(f.search(tenant, params)), matchedSpans(ice.search(tenant, params))
				if !slices.Equal(duck, iceGot) {
					t.Errorf("search %v for tenant %s: DuckDB %q, Iceberg %q", params, tenant, duck, iceGot)
				}
				for _, m := range duck {
					_, spans, _ := strings.Cut(m, ": ")
					for _, name := range strings.Split(strings.TrimSpace(spans[:strings.LastIndex(spans, " (")]), ",") {
						if name != "" && !strings.HasPrefix(name, tenant+"-") {
							t.Errorf("search %v for tenant %s: span %q of another tenant (%s)", params, tenant, name, m)
						}
					}
				}
			}
		}
	}
	around := url.Values{"q": {"{}"}, "spss": {"20"}, "start": {fmt.Sprint(bs - 10)}, "end": {fmt.Sprint(bs + 10)}}
	for reader, f := range map[string]*fixture{"duckdb": f, "iceberg": ice} {
		got := matchedSpans(f.search("a", around))
		if want := []string{"a5a5: a-nostart-after,a-nostart-inside,a-nostart-nextday,a-root,a-timeless (5)"}; !slices.Equal(got, want) {
			t.Errorf("%s search %v for tenant a: %q, want %q", reader, around, got, want)
		}
	}
	for _, f := range []*fixture{f, ice} {
		if rec := f.get("a|b", "/api/v2/traces/"+startlessTraceID, "application/protobuf"); rec.Code != http.StatusBadRequest {
			t.Errorf("trace by id for tenants a|b: %d %s, want 400 (a read serves one tenant)", rec.Code, rec.Body)
		}
	}
}
