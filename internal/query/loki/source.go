package loki

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// source is a logql.Source over the logs table, read for one scope.
type source struct {
	reader query.Reader
	scope  tenancy.Scope
	table  string
}

// resource is a resource's parsed attributes and stream labels, kept
// per query by its JSON text: a query's records share few resources.
type resource struct {
	attrs   map[string]json.RawMessage
	members []member // attrs in their order, for structured metadata
	stream  map[streamKey]logql.Labels
}

type streamKey struct {
	service, level, tenant string
}

type resources map[string]*resource

func (rs resources) get(res string) *resource {
	r := rs[res]
	if r == nil {
		r = &resource{stream: map[streamKey]logql.Labels{}}
		if res != "" {
			_ = json.Unmarshal([]byte(res), &r.attrs)
			r.members, _ = members([]byte(res))
		}
		rs[res] = r
	}
	return r
}

func (r *resource) labels(service, level, tenant string) logql.Labels {
	k := streamKey{service, level, tenant}
	ls, ok := r.stream[k]
	if !ok {
		ls = streamLabels(service, r.attrs, level, tenant)
		r.stream[k] = ls
	}
	return ls
}

// Select reads the entries of sel. A limited read with line filters
// keeps the entries of the first records SQL passes, read again with a
// larger limit while the filters drop records of structured bodies
// (which SQL passes unfiltered, selectSQL) among a full limit's worth:
// the entries answered are the first sel.Limit the filters keep.
func (s *source) Select(ctx context.Context, sel logql.Selection, fn func(*logql.Entry) error) error {
	if sel.Limit <= 0 || len(sel.Filters) == 0 {
		_, _, err := s.read(ctx, sel, sel.Limit, fn)
		return err
	}
	for limit := sel.Limit; ; limit = min(2*limit, math.MaxInt32) {
		var kept []logql.Entry
		rows, dropped, err := s.read(ctx, sel, limit, func(e *logql.Entry) error {
			if len(kept) < sel.Limit {
				kept = append(kept, *e)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if dropped == 0 || len(kept) >= sel.Limit || rows < limit || limit == math.MaxInt32 {
			for i := range kept {
				if err := fn(&kept[i]); err != nil {
					return err
				}
			}
			return nil
		}
	}
}

// read reads at most limit records of sel (none when 0) and calls fn
// with the entries the line filters keep; it returns the records read
// and those of structured bodies the filters dropped.
func (s *source) read(ctx context.Context, sel logql.Selection, limit int, fn func(*logql.Entry) error) (rows, dropped int, err error) {
	var args sqlArgs
	q := selectSQL(s.table, sel, limit, s.scope.All, &args)
	rr, err := s.reader.Query(ctx, s.scope, q, args...)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", s.table, err)
	}
	defer rr.Release()
	res := resources{}
	cache := metadataCache{}
	var e logql.Entry
	var r row
	for rr.Next() {
		rec := rr.RecordBatch()
		cols, err := entryCols(rec)
		if err != nil {
			return rows, dropped, err
		}
		for i := range int(rec.NumRows()) {
			rows++
			cols.read(i, &r)
			if r.structured {
				r.line = structuredLine(r.line)
				if !keeps(sel.Filters, r.line) {
					dropped++
					continue
				}
			}
			rs := res.get(r.resource)
			e = logql.Entry{TS: r.ts, Line: r.line, Stream: rs.labels(r.service, r.level, r.tenant), Metadata: r.metadata(rs.members, cache)}
			if err := fn(&e); err != nil {
				return rows, dropped, err
			}
		}
	}
	if err := rr.Err(); err != nil {
		return rows, dropped, fmt.Errorf("read %s: %w", s.table, err)
	}
	return rows, dropped, nil
}

// structuredLine is the line of a map or array body, from the body's
// JSON as the table holds it: pdata's AsString of the value, as Loki's
// OTLP ingestion writes it (pkg/loghttp/push/otlp.go otlpLogToPushEntry)
// — every map's keys sorted, doubles as encoding/json writes them (2,
// 1e+21; the table has 2.0, 1e21), U+2028 and U+2029 escaped. JSON that
// does not read (never written by the decoder) is its own line.
func structuredLine(body string) string {
	v, err := otel.ValueFromJSON([]byte(body))
	if err != nil {
		return body
	}
	return v.AsString()
}

// keeps says whether every line filter keeps line.
func keeps(filters []*logql.LineFilter, line string) bool {
	for _, f := range filters {
		if !f.Keeps(line) {
			return false
		}
	}
	return true
}

// text is an Arrow column of strings, whichever layout the reader gives.
type text interface {
	IsNull(int) bool
	Value(int) string
}

// ints is an Arrow column of integers of any width.
type ints func(i int) int64

func intColumn(a arrow.Array) (ints, error) {
	switch c := a.(type) {
	case *array.Int64:
		return func(i int) int64 { return c.Value(i) }, nil
	case *array.Int32:
		return func(i int) int64 { return int64(c.Value(i)) }, nil
	case *array.Int16:
		return func(i int) int64 { return int64(c.Value(i)) }, nil
	}
	return nil, fmt.Errorf("read logs: an integer column of type %s", a.DataType())
}

func textColumn(a arrow.Array) (text, error) {
	if t, ok := a.(text); ok {
		return t, nil
	}
	return nil, fmt.Errorf("read logs: a text column of type %s", a.DataType())
}

// columns are a batch's columns of entryColumns.
type columns struct {
	ts, severityNumber, flags, dropped, observed                                                                       ints
	line, service, res, scope, attrs, scopeName, scopeVersion, severityText, traceID, spanID, level, tenant, eventName text
	structured                                                                                                         *array.Boolean
}

func entryCols(rec arrow.RecordBatch) (*columns, error) {
	c := &columns{}
	var err error
	structured, ok := rec.Column(16).(*array.Boolean)
	if !ok {
		return nil, fmt.Errorf("read logs: a structured column of type %s", rec.Column(16).DataType())
	}
	c.structured = structured
	texts := map[int]*text{1: &c.line, 2: &c.service, 3: &c.res, 4: &c.scope, 5: &c.attrs, 6: &c.scopeName, 7: &c.scopeVersion, 8: &c.severityText, 10: &c.traceID, 11: &c.spanID, 14: &c.level, 15: &c.tenant, 17: &c.eventName}
	for i, dst := range texts {
		if *dst, err = textColumn(rec.Column(i)); err != nil {
			return nil, err
		}
	}
	for i, dst := range map[int]*ints{0: &c.ts, 9: &c.severityNumber, 12: &c.flags, 13: &c.dropped, 18: &c.observed} {
		if *dst, err = intColumn(rec.Column(i)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// read reads row i into r. Arrow's strings point into the batch's
// buffers, which the next batch reuses: each is copied.
func (c *columns) read(i int, r *row) {
	v := func(t text) string { return strings.Clone(t.Value(i)) }
	*r = row{ts: c.ts(i), line: v(c.line), service: v(c.service), resource: v(c.res),
		scope: v(c.scope), attrs: v(c.attrs), scopeName: v(c.scopeName), scopeVersion: v(c.scopeVersion),
		severityText: v(c.severityText), severityNumber: int32(c.severityNumber(i)), traceID: v(c.traceID),
		spanID: v(c.spanID), flags: c.flags(i), droppedAttributes: c.dropped(i), level: v(c.level), tenant: v(c.tenant),
		structured: c.structured.Value(i), eventName: v(c.eventName), observed: c.observed(i)}
}
