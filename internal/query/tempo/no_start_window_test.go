package tempo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// A trace asked for by id within a window it runs in is answered whole,
// as without the window (Tempo answers the whole trace of every block
// overlapping the window): also its span sent without a start (OTLP's 0,
// a broken clock; stored with a NULL start_time), which the window's
// condition on start_time left out, and the span ending before it
// starts. The trace was loaded twice (a client's retry): each span once.
func TestTraceByIDInAWindowKeepsASpanWithoutAStart(t *testing.T) {
	traceByIDInAWindowKeepsASpanWithoutAStart(t, newFixtureOf(t, map[string][]ptrace.Traces{"a": {skewTrace(), skewTrace()}}, maxTraceSpans))
}

func traceByIDInAWindowKeepsASpanWithoutAStart(t *testing.T, f *fixture) {
	trace := skewTraceID
	s := base.Unix()
	spans := func(path string) []string {
		t.Helper()
		rec := f.get("a", path, "application/protobuf")
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		got := decodeTraceV2(t, rec.Body.Bytes()).trace
		var ids []string
		for i := range got.ResourceSpans().Len() {
			sss := got.ResourceSpans().At(i).ScopeSpans()
			for j := range sss.Len() {
				sps := sss.At(j).Spans()
				for k := range sps.Len() {
					sp := sps.At(k)
					ids = append(ids, fmt.Sprintf("%s [%d, %d]", sp.SpanID(), sp.StartTimestamp(), sp.EndTimestamp()))
				}
			}
		}
		slices.Sort(ids)
		return ids
	}
	whole := spans("/api/v2/traces/" + trace)
	if len(whole) != 3 {
		t.Fatalf("trace %s: spans %q, want its 3 spans once each", trace, whole)
	}
	for _, w := range [][2]int64{{s - 10, s + 10}, {s, s + 1}, {s - 3600, s}} {
		path := fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", trace, w[0], w[1])
		if got := spans(path); !slices.Equal(got, whole) {
			t.Errorf("%s: spans %q, want the whole trace %q", path, got, whole)
		}
	}
	// A window before the trace (within the hour read around it): the
	// span without a start has no time to put the trace in it, and it
	// is not found there.
	path := fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", trace, s-1800, s-1200)
	if got := spans(path); len(got) != 0 {
		t.Errorf("%s: spans %q, want none: the trace runs after the window", path, got)
	}
}

// A search over a window finds a trace running in it with every span of
// it, as a search without a window does: also its span sent without a
// start (a NULL start_time, which the window's condition left out of the
// spans matched, counted and shown).
func TestSearchInAWindowKeepsASpanWithoutAStart(t *testing.T) {
	searchInAWindowKeepsASpanWithoutAStart(t, newFixtureOf(t, map[string][]ptrace.Traces{"a": {skewTrace(), skewTrace()}}, maxTraceSpans))
}

func searchInAWindowKeepsASpanWithoutAStart(t *testing.T, f *fixture) {
	s := base.Unix()
	whole := matchedSpans(f.search("a", url.Values{"q": {"{}"}, "spss": {"10"}}))
	if want := []string{trimID(skewTraceID) + ": span f100000000000001,span f100000000000002,span f100000000000003 (3)"}; !slices.Equal(whole, want) {
		t.Fatalf("search without a window: %q, want %q", whole, want)
	}
	for _, w := range [][2]int64{{s - 10, s + 10}, {s, s + 1}} {
		params := url.Values{"q": {"{}"}, "spss": {"10"}, "start": {fmt.Sprint(w[0])}, "end": {fmt.Sprint(w[1])}}
		if got := matchedSpans(f.search("a", params)); !slices.Equal(got, whole) {
			t.Errorf("search %v: %q, want the trace's spans as without a window %q", params, got, whole)
		}
	}
}

// The same on the Iceberg reader, whose scans the window's condition and
// the spans without a start (IS NULL) prune.
func TestIcebergWindowKeepsASpanWithoutAStart(t *testing.T) {
	db, dir := openDB(t)
	loadSpans(t, db, dir, map[string][]ptrace.Traces{"a": {skewTrace(), skewTrace()}})
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, 6, 6, 1, openBenchSink(t, lake))
	f := &fixture{t: t, db: db, mux: http.NewServeMux()}
	if _, err := register(f.mux, Options{Reader: openBenchReader(t, lake, nil), Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, maxTraceSpans); err != nil {
		t.Fatal(err)
	}
	traceByIDInAWindowKeepsASpanWithoutAStart(t, f)
	searchInAWindowKeepsASpanWithoutAStart(t, f)
}

// skewTraceID is the trace of skewTrace.
const skewTraceID = "000000000000000000000000000000f1"

// skewTrace is tenant a's trace of a root span, a child sent without a
// start and a child ending before it starts.
func skewTrace() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "skew")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(span, parent string, start, end uint64) {
		sp := ss.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(traceID(skewTraceID)))
		sp.SetSpanID(pcommon.SpanID(spanID(span)))
		if parent != "" {
			sp.SetParentSpanID(pcommon.SpanID(spanID(parent)))
		}
		sp.SetName("span " + span)
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
	}
	b := uint64(base.UnixNano())
	add("f100000000000001", "", b, b+2e9)
	add("f100000000000002", "f100000000000001", 0, b+1e9)     // no start
	add("f100000000000003", "f100000000000001", b+1e9, b+5e8) // ends before it starts
	return td
}

// A trace with a span sent without a start is found starting at its first
// start and lasting to its last end, in a search with or without a
// window: the span's unset start (OTLP's 0) was taken for its start, and
// the trace started in 1970 (no startTimeUnixNano) and lasted 2091488467
// ms (its 56 years, wrapped in the answer's uint32).
func TestSearchTimesOfATraceWithASpanWithoutAStart(t *testing.T) {
	f := newFixtureOf(t, map[string][]ptrace.Traces{"a": {skewTrace(), skewTrace()}}, maxTraceSpans)
	s := base.Unix()
	for _, params := range []url.Values{{"q": {"{}"}}, {"q": {"{}"}, "start": {fmt.Sprint(s - 10)}, "end": {fmt.Sprint(s + 10)}},
		{"q": {"{ traceDuration <= 2s }"}}, {"q": {"{ traceDuration <= 2s }"}, "start": {fmt.Sprint(s - 10)}, "end": {fmt.Sprint(s + 10)}}} {
		rec := f.get("a", "/api/search?"+params.Encode(), "")
		if rec.Code != 200 {
			t.Fatalf("search %v: %d %s", params, rec.Code, rec.Body)
		}
		var out struct {
			Traces []struct {
				TraceID           string `json:"traceID"`
				StartTimeUnixNano string `json:"startTimeUnixNano"`
				DurationMs        int64  `json:"durationMs"`
			} `json:"traces"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(base.UnixNano())
		if len(out.Traces) != 1 || out.Traces[0].StartTimeUnixNano != want || out.Traces[0].DurationMs != 2000 {
			t.Errorf("search %v: %+v, want trace %s starting at %s, lasting 2000 ms", params, out.Traces, trimID(skewTraceID), want)
		}
	}
}
