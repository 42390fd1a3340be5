package tempo

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// row is one row of an answer, read by column index.
type row struct {
	rec arrow.RecordBatch
	i   int
}

func (r row) null(c int) bool { return r.rec.Column(c).IsNull(r.i) }

// str is a text column's value, "" for null, copied: Arrow's strings
// point into the batch's buffers, freed when the reader moves on.
func (r row) str(c int) string { return strings.Clone(r.view(c)) }

// view is a text column's value pointing into the batch.
func (r row) view(c int) string { return textAt(r.rec.Column(c), r.i) }

// textAt is col's text value at i, "" for null.
func textAt(col arrow.Array, i int) string {
	if col.IsNull(i) {
		return ""
	}
	switch a := col.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	}
	return col.ValueStr(i)
}

// strs is a list of text column's values, copied; nil for null.
func (r row) strs(c int) []string {
	col := r.rec.Column(c)
	if col.IsNull(r.i) {
		return nil
	}
	l, ok := col.(*array.List)
	if !ok {
		panic(fmt.Sprintf("BUG: column %d is %s, not a list", c, col.DataType()))
	}
	start, end := l.ValueOffsets(r.i)
	var out []string
	for i := int(start); i < int(end); i++ {
		if !l.ListValues().IsNull(i) {
			out = append(out, strings.Clone(textAt(l.ListValues(), i)))
		}
	}
	return out
}

// int is an integer column's value, 0 for null.
func (r row) int(c int) int64 {
	col := r.rec.Column(c)
	if col.IsNull(r.i) {
		return 0
	}
	switch a := col.(type) {
	case *array.Int64:
		return a.Value(r.i)
	case *array.Int32:
		return int64(a.Value(r.i))
	case *array.Uint64:
		return int64(a.Value(r.i))
	case *array.Uint32:
		return int64(a.Value(r.i))
	}
	panic(fmt.Sprintf("BUG: column %d is %s, not an integer", c, col.DataType()))
}

// float is a floating-point column's value, 0 for null.
func (r row) float(c int) float64 {
	col := r.rec.Column(c)
	if col.IsNull(r.i) {
		return 0
	}
	switch a := col.(type) {
	case *array.Float64:
		return a.Value(r.i)
	case *array.Int64:
		return float64(a.Value(r.i))
	}
	panic(fmt.Sprintf("BUG: column %d is %s, not a number", c, col.DataType()))
}

// each runs sql for scope and calls f with each row of the answer.
func each(ctx context.Context, rd query.Reader, s tenancy.Scope, sql string, params []any, f func(row) error) error {
	rr, err := rd.Query(ctx, s, sql, params...)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			if err := f(row{rec: rec, i: i}); err != nil {
				return err
			}
		}
	}
	return rr.Err()
}
