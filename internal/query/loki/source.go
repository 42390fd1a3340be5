package loki

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

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
	attrs  map[string]json.RawMessage
	stream map[streamKey]logql.Labels
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

// Select reads the entries of sel.
func (s *source) Select(ctx context.Context, sel logql.Selection, fn func(*logql.Entry) error) error {
	var args sqlArgs
	q := selectSQL(s.table, sel, s.scope.All, &args)
	rr, err := s.reader.Query(ctx, s.scope, q, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.table, err)
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
			return err
		}
		for i := range int(rec.NumRows()) {
			cols.read(i, &r)
			rs := res.get(r.resource)
			e = logql.Entry{TS: r.ts, Line: r.line, Stream: rs.labels(r.service, r.level, r.tenant), Metadata: r.metadata(rs.attrs, cache)}
			if err := fn(&e); err != nil {
				return err
			}
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.table, err)
	}
	return nil
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
	ts, severityNumber, flags, dropped                                                                      ints
	line, service, res, scope, attrs, scopeName, scopeVersion, severityText, traceID, spanID, level, tenant text
}

func entryCols(rec arrow.RecordBatch) (*columns, error) {
	c := &columns{}
	var err error
	texts := map[int]*text{1: &c.line, 2: &c.service, 3: &c.res, 4: &c.scope, 5: &c.attrs, 6: &c.scopeName, 7: &c.scopeVersion, 8: &c.severityText, 10: &c.traceID, 11: &c.spanID, 14: &c.level, 15: &c.tenant}
	for i, dst := range texts {
		if *dst, err = textColumn(rec.Column(i)); err != nil {
			return nil, err
		}
	}
	for i, dst := range map[int]*ints{0: &c.ts, 9: &c.severityNumber, 12: &c.flags, 13: &c.dropped} {
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
		spanID: v(c.spanID), flags: c.flags(i), droppedAttributes: c.dropped(i), level: v(c.level), tenant: v(c.tenant)}
}
