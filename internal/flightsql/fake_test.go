package flightsql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// The SQL the fake Reader answers.
const (
	allSpans     = "SELECT name, n FROM spans"
	spansFrom    = "SELECT name, n FROM spans WHERE n >= ?"
	endlessSpans = "SELECT name, n FROM endless"
	brokenSpans  = "SELECT name, n FROM broken"
	deleteSpans  = "DELETE FROM spans"
	wideSpans    = "SELECT name, n FROM wide" // wideRows rows of long names in one batch
)

// wideRows of wideName bytes: one batch of about 10 MiB.
const (
	wideRows = 20_000
	wideName = 500
)

var spansSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
}, nil)

var positionsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "partition", Type: arrow.PrimitiveTypes.Int32},
	{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// endlessBatches ends the endless query all the same, so that a server
// that read a result whole before sending it fails a test rather than
// hanging it.
const endlessBatches = 50_000

// spanRows is how many rows of spans each tenant has; batchRows how many
// a batch holds, so a tenant's rows come in 4 batches.
const (
	spanRows  = 10
	batchRows = 3
)

// call is one Reader.Query the fake answered.
type call struct {
	scope  tenancy.Scope
	sql    string
	params []any
}

// fakeReader answers a few queries over the tenants a and b, each with
// rows a-0…a-9 (n 0…9) and b-0…b-9, making each batch only when asked
// (so a test sees how far a query was read), and counts the readers not
// yet released.
type fakeReader struct {
	mu     sync.Mutex
	calls  []call
	tables []tenancy.Scope // the scopes Tables was asked for

	open    atomic.Int64 // readers handed out and not released
	batches atomic.Int64 // batches made
}

var _ query.Reader = (*fakeReader)(nil)
var _ Parameters = (*fakeReader)(nil)

func (f *fakeReader) Query(ctx context.Context, s tenancy.Scope, sql string, params ...any) (array.RecordReader, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{s, sql, params})
	f.mu.Unlock()
	tenants := []string{s.Tenant}
	if s.All {
		tenants = []string{"a", "b"}
	}
	var rows []spanRow
	for _, t := range tenants {
		for n := range spanRows {
			rows = append(rows, spanRow{fmt.Sprintf("%s-%d", t, n), int64(n)})
		}
	}
	switch sql {
	case allSpans:
		return f.reader(ctx, rows, -1), nil
	case spansFrom:
		if len(params) != 1 {
			return nil, fmt.Errorf("want 1 parameter, got %d", len(params))
		}
		from, ok := params[0].(int64)
		if !ok {
			return nil, fmt.Errorf("parameter 1 is %T, not int64", params[0])
		}
		rows = slices.DeleteFunc(rows, func(r spanRow) bool { return r.n < from })
		return f.reader(ctx, rows, -1), nil
	case endlessSpans:
		return f.reader(ctx, nil, -1), nil
	case brokenSpans:
		return f.reader(ctx, rows, 1), nil
	case wideSpans:
		rows = rows[:0]
		for n := range wideRows {
			rows = append(rows, spanRow{fmt.Sprintf("%0*d", wideName, n), int64(n)})
		}
		r := f.reader(ctx, rows, -1)
		r.per = wideRows
		return r, nil
	case deleteSpans:
		return nil, &query.RefusedError{Reason: "only a single SELECT is answered"}
	}
	return nil, errors.New(`Catalog Error: Table "nope" does not exist in /var/lib/tracelake/tracelake.duckdb`)
}

func (f *fakeReader) Schema(_ context.Context, _ tenancy.Scope, sql string) (*arrow.Schema, error) {
	switch sql {
	case allSpans, spansFrom, endlessSpans, brokenSpans, wideSpans:
		return spansSchema, nil
	case deleteSpans:
		return nil, &query.RefusedError{Reason: "only a single SELECT is answered"}
	}
	return nil, errors.New(`Catalog Error: Table "nope" does not exist`)
}

func (f *fakeReader) Parameters(_ context.Context, _ tenancy.Scope, sql string) (*arrow.Schema, error) {
	if sql == spansFrom {
		return arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), nil
	}
	return arrow.NewSchema(nil, nil), nil
}

// Tables: a tenant reads spans; the operator also the positions.
func (f *fakeReader) Tables(_ context.Context, s tenancy.Scope) ([]query.Table, error) {
	f.mu.Lock()
	f.tables = append(f.tables, s)
	f.mu.Unlock()
	tables := []query.Table{{Name: "spans", Schema: spansSchema}}
	if s.All {
		tables = append(tables, query.Table{Name: "positions", Schema: positionsSchema})
	}
	return tables, nil
}

func (f *fakeReader) queries() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeReader) tableScopes() []tenancy.Scope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tables)
}

// released waits until every reader handed out was released.
func (f *fakeReader) released(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.open.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d query readers never released", f.open.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type spanRow struct {
	name string
	n    int64
}

// reader streams rows in batches of batchRows, made one at a time; nil
// rows stream "forever" (endlessBatches, or until ctx ends). failAfter ≥ 0 fails the reader
// after that many batches.
func (f *fakeReader) reader(ctx context.Context, rows []spanRow, failAfter int) *lazyReader {
	f.open.Add(1)
	r := &lazyReader{ctx: ctx, f: f, rows: rows, endless: rows == nil, failAfter: failAfter, per: batchRows}
	r.refs.Store(1)
	return r
}

type lazyReader struct {
	ctx       context.Context
	f         *fakeReader
	rows      []spanRow
	endless   bool
	failAfter int
	per       int // rows a batch holds
	made      int
	refs      atomic.Int64
	cur       arrow.RecordBatch
	err       error
}

func (r *lazyReader) Retain()               { r.refs.Add(1) }
func (r *lazyReader) Schema() *arrow.Schema { return spansSchema }

func (r *lazyReader) Release() {
	if r.refs.Add(-1) == 0 {
		if r.cur != nil {
			r.cur.Release()
			r.cur = nil
		}
		r.f.open.Add(-1)
	}
}

func (r *lazyReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil {
		return false
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return false
	}
	if r.failAfter >= 0 && r.made == r.failAfter {
		r.err = errors.New("IO Error: could not read /var/lib/tracelake/spans/part-7.parquet: unexpected end")
		return false
	}
	var batch []spanRow
	if r.endless {
		if r.made == endlessBatches {
			return false
		}
		for i := range batchRows {
			batch = append(batch, spanRow{fmt.Sprintf("e-%d", r.made*batchRows+i), int64(r.made*batchRows + i)})
		}
	} else {
		if len(r.rows) == 0 {
			return false
		}
		k := min(r.per, len(r.rows))
		batch, r.rows = r.rows[:k], r.rows[k:]
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, spansSchema)
	defer b.Release()
	for _, row := range batch {
		b.Field(0).(*array.StringBuilder).Append(row.name)
		b.Field(1).(*array.Int64Builder).Append(row.n)
	}
	r.cur = b.NewRecordBatch()
	r.made++
	r.f.batches.Add(1)
	return true
}

func (r *lazyReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *lazyReader) Record() arrow.RecordBatch      { return r.cur }
func (r *lazyReader) Err() error                     { return r.err }

// fakeTenants holds tokens and the tenants each may read ("*": any, and
// the operator's scope when the call names none).
type fakeTenants map[string][]string

func (ft fakeTenants) Read(sent, token string) (tenancy.Scope, error) {
	may, ok := ft[token]
	if !ok {
		return tenancy.Scope{}, &tenancy.Error{Kind: tenancy.Unauthenticated, Msg: "a valid bearer token is required"}
	}
	if strings.ContainsAny(sent, " /") {
		return tenancy.Scope{}, &tenancy.Error{Kind: tenancy.Invalid, Msg: fmt.Sprintf("invalid tenant %q", sent)}
	}
	wild := slices.Contains(may, "*")
	switch {
	case sent == "" && wild:
		return tenancy.Operator, nil
	case sent == "":
		return tenancy.Scope{}, &tenancy.Error{Kind: tenancy.Unauthenticated, Msg: "a tenant is required in x-scope-orgid"}
	case wild || slices.Contains(may, sent):
		return tenancy.One(sent), nil
	}
	return tenancy.Scope{}, &tenancy.Error{Kind: tenancy.Forbidden, Msg: "the token may not read tenant " + sent}
}

// The tokens of the tests.
var testTenants = fakeTenants{
	"tok-a":  {"a"},
	"tok-b":  {"b"},
	"tok-op": {"*"},
}
