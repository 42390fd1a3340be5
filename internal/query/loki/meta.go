package loki

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// stream is a stream of the metadata routes, with what it holds in the
// range asked.
type stream struct {
	labels         logql.Labels
	entries, bytes int64
	bucket         int64 // the step it falls in, for volume_range
}

// streams reads the streams the matchers select in [start, end), each
// once; every metadata route answers from them, so a tenant learns only
// the labels and values of its own records.
func (a *api) streams(ctx context.Context, scope tenancy.Scope, ms []*logql.Matcher, start, end, step int64, lineBytes bool) ([]stream, error) {
	var args sqlArgs
	q := streamsSQL(a.o.Table, ms, start, end, step, scope.All, lineBytes, &args)
	rr, err := a.o.Reader.Query(ctx, scope, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the streams of %s: %w", a.o.Table, err)
	}
	defer rr.Release()
	res := resources{}
	var all logql.ByLabels[stream]
	for rr.Next() {
		rec := rr.RecordBatch()
		service, err1 := textColumn(rec.Column(0))
		resource, err2 := textColumn(rec.Column(1))
		level, err3 := textColumn(rec.Column(2))
		entries, err4 := intColumn(rec.Column(3))
		bytes, err5 := intColumn(rec.Column(4))
		bucket, err6 := intColumn(rec.Column(5))
		tenant, err7 := textColumn(rec.Column(6))
		structured, err8 := textColumn(rec.Column(7))
		for _, err := range []error{err1, err2, err3, err4, err5, err6, err7, err8} {
			if err != nil {
				return nil, err
			}
		}
		for i := range int(rec.NumRows()) {
			// Copies: Arrow's strings point into buffers the next batch reuses.
			ls := res.get(strings.Clone(resource.Value(i))).labels(strings.Clone(service.Value(i)), strings.Clone(level.Value(i)), strings.Clone(tenant.Value(i)))
			b := bucket(i)
			key := append(slices.Clone(ls), logql.Label{Name: "__bucket__", Value: strconv.FormatInt(b, 10)})
			s := all.At(key, func() *stream { return &stream{labels: ls, bucket: b} })
			s.entries += entries(i)
			s.bytes += bytes(i)
			if !structured.IsNull(i) {
				s.bytes += entries(i) * int64(len(structuredLine(structured.Value(i))))
			}
		}
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("read the streams of %s: %w", a.o.Table, err)
	}
	var out []stream
	for _, s := range all.Sorted() {
		out = append(out, *s)
	}
	return out, nil
}

// selector reads a stream selector parameter (a log query's selector
// is taken, its pipeline ignored, as Loki's metadata routes do); none
// selects every stream.
func selector(q string) ([]*logql.Matcher, error) {
	if q == "" {
		return nil, nil
	}
	e, err := logql.Parse(q)
	if err != nil {
		return nil, err
	}
	log, ok := e.(*logql.LogExpr)
	if !ok {
		return nil, badParam("a stream selector is required, got a metric query")
	}
	return log.Matchers, nil
}

// metaRange reads the range and selector of a metadata request.
func (a *api) metaRange(r *http.Request, param string) ([][]*logql.Matcher, int64, int64, error) {
	start, end, err := bounds(r, a.now())
	if err != nil {
		return nil, 0, 0, err
	}
	var sels [][]*logql.Matcher
	for _, q := range r.Form[param] {
		ms, err := selector(q)
		if err != nil {
			return nil, 0, 0, err
		}
		sels = append(sels, ms)
	}
	if len(sels) == 0 {
		sels = [][]*logql.Matcher{nil}
	}
	// Loki's metadata ranges include their end (held at int64's end:
	// an end of its last nanosecond wrapped to 1677, an empty range).
	return sels, start.UnixNano(), addNanos(end.UnixNano(), 1), nil
}

// metaStreams does what every metadata route does first: it reads the
// form, the range and the selectors of param, and the streams they
// select; ok false when it answered an error.
func (a *api) metaStreams(w http.ResponseWriter, r *http.Request, scope tenancy.Scope, param string) (ss []stream, sels [][]*logql.Matcher, end int64, ok bool) {
	ss, sels, _, end, ok = a.metaStreamsBy(w, r, scope, param, false, false)
	return ss, sels, end, ok
}

// metaStreamsBy is metaStreams, by bucket of the step parameter when
// stepped (volume_range), with the range's start; with lineBytes, each
// stream's bytes are its lines' as query_range answers them (streamsSQL),
// else they are left out of the answer's use.
func (a *api) metaStreamsBy(w http.ResponseWriter, r *http.Request, scope tenancy.Scope, param string, stepped, lineBytes bool) (ss []stream, sels [][]*logql.Matcher, start, end int64, ok bool) {
	if !a.form(w, r) {
		return nil, nil, 0, 0, false
	}
	if param == "match[]" && len(r.Form[param]) == 0 {
		param = "match"
	}
	sels, start, end, err := a.metaRange(r, param)
	var step time.Duration
	if err == nil && stepped {
		step, err = volumeStep(r, start, end)
		step = volumeInterval(step)
	}
	if err == nil {
		ss, err = a.streamsOf(r.Context(), scope, sels, start, end, int64(step), lineBytes)
	}
	if err != nil {
		a.fail(w, r, err)
		return nil, nil, 0, 0, false
	}
	return ss, sels, start, end, true
}

// streamsOf reads the streams of every selector, each stream once.
func (a *api) streamsOf(ctx context.Context, scope tenancy.Scope, sels [][]*logql.Matcher, start, end, step int64, lineBytes bool) ([]stream, error) {
	var all []stream
	seen := map[string]bool{}
	for _, ms := range sels {
		ss, err := a.streams(ctx, scope, ms, start, end, step, lineBytes)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			if k := s.labels.String() + strconv.FormatInt(s.bucket, 10); !seen[k] {
				seen[k] = true
				all = append(all, s)
			}
		}
	}
	return all, nil
}

// labels answers /loki/api/v1/labels: the names of the stream labels in
// the range.
func (a *api) labels(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	names := map[string]bool{}
	for _, s := range ss {
		for _, l := range s.labels {
			names[l.Name] = true
		}
	}
	writeJSON(w, stringsBody(names))
}

// labelValues answers /loki/api/v1/label/{name}/values.
func (a *api) labelValues(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	name := r.PathValue("name")
	values := map[string]bool{}
	for _, s := range ss {
		if v, ok := s.labels.Get(name); ok {
			values[v] = true
		}
	}
	writeJSON(w, stringsBody(values))
}

func stringsBody(set map[string]bool) []byte {
	names := slices.Sorted(maps.Keys(set))
	b := []byte(`{"status":"success","data":`)
	b = appendArray(b, len(names), func(b []byte, i int) []byte { return appendString(b, names[i]) })
	return append(b, '}')
}

// series answers /loki/api/v1/series: the streams match[] selects.
func (a *api) series(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "match[]")
	if !ok {
		return
	}
	b := []byte(`{"status":"success","data":`)
	b = appendArray(b, len(ss), func(b []byte, i int) []byte { return appendLabels(b, ss[i].labels) })
	writeJSON(w, append(b, '}'))
}

// indexStats answers /loki/api/v1/index/stats (Loki
// pkg/logproto/indexgateway.proto IndexStatsResponse): streams, chunks,
// bytes and entries of what the selector selects. There are no chunks
// here: each stream counts as one, the smallest Loki could hold.
func (a *api) indexStats(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, _, ok := a.metaStreamsBy(w, r, scope, "query", false, true)
	if !ok {
		return
	}
	var entries, bytes int64
	for _, s := range ss {
		entries += s.entries
		bytes += s.bytes
	}
	writeJSON(w, fmt.Appendf(nil, `{"streams":%d,"chunks":%d,"bytes":%d,"entries":%d}`, len(ss), len(ss), bytes, entries))
}
