package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// A scan reaches DuckDB as an Arrow stream registered as a view
// (duckdb-go's RegisterView, DuckDB's C API arrow scan). That scan hands
// the predicates and columns DuckDB pushes into it to the stream's
// producer and applies none itself; a stream of the C API cannot take
// them, so they would be lost: a WHERE would keep every row. So each
// batch reaches DuckDB as one struct column whose fields are the table's
// columns and a string view: DuckDB pushes nothing into a struct with a
// field of a type it cannot push a filter on, and filters every row
// itself. The view a query names takes the fields out again.
//
// The C API's stream is one stream, however often the view is scanned: a
// second scan would read what the first left, and answer wrong. Each
// reference of a query has its own scan and view, CTEs named twice are
// materialized, references a recursive CTE repeats are copied into a
// table; and a stream asked for a batch after it ended fails the query
// instead of answering it.

// structColumn names the one column of a registered stream.
const structColumn = "r"

// fillerField is the struct's field that keeps DuckDB's filters out.
const fillerField = "tracelake_no_pushdown"

// scanReader is one scan's stream of record batches, each as one struct
// column (see above), with timestamps made plain (UTC, as the DuckDB sink
// stores them).
type scanReader struct {
	refs   atomic.Int64
	table  string
	schema *arrow.Schema
	st     *arrow.StructType
	seq    iter.Seq2[arrow.RecordBatch, error] // nil: no batch at all
	guard  bool                                // a batch asked for after the end is a second scan
	mem    memory.Allocator                    // for the filler field
	read   func(rows int64)                    // told of each batch handed on (tests), or nil

	// failed is the scan's error, once it has one, for the session to
	// tell its query's failure from the caller's (session.failure): err
	// is set on a DuckDB thread, this is read on the query's.
	failed atomic.Pointer[error]

	// The producer goroutine, started by the first Next.
	ch      chan scanItem
	done    chan struct{}
	wg      sync.WaitGroup
	started bool

	cur   arrow.RecordBatch
	err   error
	ended bool
}

type scanItem struct {
	rec arrow.RecordBatch
	err error
}

// newScanReader streams seq, whose batches have schema sc.
func newScanReader(table string, sc *arrow.Schema, seq iter.Seq2[arrow.RecordBatch, error], guard bool, mem memory.Allocator, read func(int64)) *scanReader {
	fields := make([]arrow.Field, 0, sc.NumFields()+1)
	for _, f := range sc.Fields() {
		fields = append(fields, arrow.Field{Name: f.Name, Type: plainType(f.Type), Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: fillerField, Type: arrow.BinaryTypes.StringView, Nullable: true})
	st := arrow.StructOf(fields...)
	r := &scanReader{table: table, st: st, seq: seq, guard: guard, mem: mem, read: read,
		schema: arrow.NewSchema([]arrow.Field{{Name: structColumn, Type: st}}, nil)}
	r.refs.Store(1)
	return r
}

// plainType is the type DuckDB reads a column as: a timestamp with a time
// zone is the same instant, in UTC, without one (DuckDB's TIMESTAMP, as
// the DuckDB sink stores timestamps).
func plainType(t arrow.DataType) arrow.DataType {
	if ts, ok := t.(*arrow.TimestampType); ok && ts.TimeZone != "" {
		return &arrow.TimestampType{Unit: ts.Unit}
	}
	return t
}

func (r *scanReader) Retain()                        { r.refs.Add(1) }
func (r *scanReader) Schema() *arrow.Schema          { return r.schema }
func (r *scanReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *scanReader) Record() arrow.RecordBatch      { return r.cur }
func (r *scanReader) Err() error                     { return r.err }

// Release stops the scan (its goroutine, its files) when the last holder
// lets go.
func (r *scanReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.started {
		close(r.done)
		for it := range r.ch {
			if it.rec != nil {
				it.rec.Release()
			}
		}
		r.wg.Wait()
	}
}

func (r *scanReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil {
		return false
	}
	if r.ended {
		if r.guard {
			r.fail(fmt.Errorf("BUG: %s was scanned a second time in one query", r.table))
		}
		return false
	}
	if r.seq == nil {
		r.ended = true
		return false
	}
	if !r.started {
		r.start()
	}
	for it := range r.ch {
		if it.err != nil {
			r.fail(fmt.Errorf("read %s: %w", r.table, it.err))
			return false
		}
		if it.rec.NumRows() == 0 {
			it.rec.Release()
			continue
		}
		r.cur = r.wrap(it.rec)
		it.rec.Release()
		if r.read != nil {
			r.read(r.cur.NumRows())
		}
		return true
	}
	r.ended = true
	return false
}

// fail ends the stream with err.
func (r *scanReader) fail(err error) {
	r.err = err
	r.failed.Store(&err)
}

// failure is the scan's error, nil while it has none.
func (r *scanReader) failure() error {
	if p := r.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// start reads the scan on a goroutine of its own: DuckDB asks for batches
// from its threads, through cgo, where the scan's iterator cannot be
// driven. It decodes one batch ahead of DuckDB (and the scan its files'
// worth, see IcebergOptions.ScanConcurrency).
func (r *scanReader) start() {
	r.started = true
	r.ch, r.done = make(chan scanItem), make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.ch)
		for rec, err := range r.seq {
			select {
			case r.ch <- scanItem{rec, err}:
			case <-r.done:
				if rec != nil {
					rec.Release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
}

// wrap makes rec the struct column of the stream's schema, sharing its
// buffers.
func (r *scanReader) wrap(rec arrow.RecordBatch) arrow.RecordBatch {
	n := int(rec.NumRows())
	children := make([]arrow.ArrayData, 0, r.st.NumFields())
	var made []arrow.ArrayData
	for i, col := range rec.Columns() {
		d := col.Data()
		if t := r.st.Field(i).Type; !arrow.TypeEqual(t, d.DataType()) {
			d = array.NewData(t, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
			made = append(made, d)
		}
		children = append(children, d)
	}
	filler := array.MakeArrayOfNull(r.mem, arrow.BinaryTypes.StringView, n)
	children = append(children, filler.Data())
	sd := array.NewData(r.st, n, []*memory.Buffer{nil}, children, 0, 0)
	col := array.MakeFromData(sd)
	out := array.NewRecordBatch(r.schema, []arrow.Array{col}, int64(n))
	col.Release()
	sd.Release()
	filler.Release()
	for _, d := range made {
		d.Release()
	}
	return out
}

// register makes rr a view named name of the session's database (the C
// API makes it in main, visible to the other sessions: the name is the
// query's own, unguessable, and the checker admits no name but the
// scope's tables'); the session drops it and releases the stream when it
// closes.
func (sess *session) register(rr array.RecordReader, name string) error {
	var release func()
	err := sess.conn.Raw(func(dc any) error {
		a, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
		if err != nil {
			return err
		}
		release, err = a.RegisterView(rr, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("register the scan of %s: %w", name, err)
	}
	sess.cleanup = append(sess.cleanup, release, func() {
		// The connection is discarded after: a failure leaves a view of
		// an ended stream, which nothing can name.
		sess.conn.ExecContext(context.Background(), "DROP VIEW IF EXISTS main."+sqltext.Ident(name))
	})
	return nil
}

// constValue is what DuckDB made of one constant expression: its type and
// its value as each type a pushed column can have.
type constValue struct {
	typ string
	i   sql.NullInt64  // as BIGINT
	us  sql.NullInt64  // as TIMESTAMP, microseconds since the epoch
	s   sql.NullString // as VARCHAR
}

// maxConstants bounds the constant expressions evaluated for one query;
// the predicates of a query with more are not pushed.
const maxConstants = 1024

// constants evaluates the constant expressions of the plans' predicates
// on the session, in the order of the plans, their predicates and
// expressions: one SELECT of them all, printed by DuckDB from the parsed
// expressions (constants, parameters, casts and consistent functions
// only), with params the values of the query's parameters.
func (sess *session) constants(ctx context.Context, template string, plans []*refPlan, params []any) ([]constValue, error) {
	var exprs []any
	for _, rp := range plans {
		for _, p := range rp.preds {
			for _, e := range p.constants() {
				c := make(map[string]any, len(e))
				for k, v := range e {
					c[k] = v
				}
				c["alias"] = fmt.Sprintf("c%d", len(exprs))
				exprs = append(exprs, c)
			}
		}
	}
	if len(exprs) == 0 || len(exprs) > maxConstants {
		return nil, nil
	}
	doc, err := decodeParse([]byte(template))
	if err != nil {
		return nil, fmt.Errorf("BUG: the constants' template: %w", err)
	}
	stmts, _ := doc["statements"].([]any)
	stmt, _ := stmts[0].(map[string]any)
	node, _ := stmt["node"].(map[string]any)
	node["select_list"] = exprs
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	inner, _, err := sess.printChecked(ctx, string(js), sess.checker.again(), false)
	if err != nil {
		return nil, err
	}
	cols := make([]string, 0, 4*len(exprs))
	for i := range exprs {
		c := fmt.Sprintf("c%d", i)
		cols = append(cols, "typeof("+c+")", "TRY_CAST("+c+" AS BIGINT)",
			"epoch_us(TRY_CAST("+c+" AS TIMESTAMP))", "TRY_CAST("+c+" AS VARCHAR)")
	}
	vals := make([]constValue, len(exprs))
	dest := make([]any, 0, len(cols))
	for i := range vals {
		dest = append(dest, &vals[i].typ, &vals[i].i, &vals[i].us, &vals[i].s)
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM (" + inner + ")"
	if len(params) > 0 {
		// DuckDB wants a value for every parameter a statement names and
		// none more: the expressions may name some of the query's alone.
		all := make([]string, len(params))
		for i := range params {
			all[i] = fmt.Sprintf("$%d", i+1)
		}
		q += ", (SELECT " + strings.Join(all, ", ") + ")"
	}
	// Times bound to DATEs and TIMEs are bound as the query binds them (runQuery):
	// by the placeholders' types, which a statement that does not prepare
	// lacks (it fails below).
	types, _ := paramTypes(ctx, sess.conn, q)
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = bindable(p) // as the query binds them (runQuery)
		if _, isTime := args[i].(time.Time); isTime && i < len(types) && (types[i] == duckdb.TYPE_DATE || types[i] == duckdb.TYPE_TIME) {
			// This statement types the placeholder by the cast it
			// names ($1::DATE), where the query may not (a bare $1
			// beside it, a TIMESTAMP): a time is bound to a DATE as its
			// midnight, to a TIME as its clock, and the query may bind
			// it as the instant. Pruned by the midnight, the scan left
			// out the rows the query keeps after it: no pruning then.
			return nil, nil
		}
		if d, ok := p.(Decimal); ok {
			// duckdb-go binds no decimal. A DOUBLE is pushed to no
			// column (icebergPred), as a DECIMAL would not be.
			f, _ := strconv.ParseFloat(d.String(), 64)
			args[i] = f
		}
	}
	if err := sess.conn.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("evaluate the query's constants: %w", err)
	}
	return vals, nil
}

// pushable says whether predicates on a column of Iceberg type t can be
// pushed: those whose comparisons Iceberg makes as DuckDB does (strings by
// their bytes, integers, timestamps to the microsecond). Not floats
// (DuckDB orders NaN above every number, Iceberg does not), not decimals.
func pushable(t iceberggo.Type) bool {
	switch t.(type) {
	case iceberggo.StringType, iceberggo.Int32Type, iceberggo.Int64Type, iceberggo.TimestampType, iceberggo.TimestampTzType:
		return true
	}
	return false
}

// integerTypes are the constant types whose value is exactly a BIGINT.
var integerTypes = map[string]bool{"TINYINT": true, "SMALLINT": true, "INTEGER": true, "BIGINT": true,
	"UTINYINT": true, "USMALLINT": true, "UINTEGER": true}

// icebergPred is p on field as an Iceberg predicate, with vals the values
// of p's expressions, if DuckDB compares the column with them as Iceberg
// would: a string with a VARCHAR, an integer with an integer, a timestamp
// with a TIMESTAMP, a DATE or a string (which DuckDB casts to TIMESTAMP,
// as the values were).
func icebergPred(fields map[string]iceberggo.NestedField, p pred, vals []constValue) (iceberggo.BooleanExpression, bool) {
	if p.op == "or" {
		return icebergOr(fields, p, vals)
	}
	field := fields[p.column]
	ref := iceberggo.Reference(field.Name)
	if p.op == "isnull" {
		return iceberggo.IsNull(ref), true
	}
	switch field.Type.(type) {
	case iceberggo.StringType:
		out := make([]string, len(vals))
		for i, v := range vals {
			if v.typ != "VARCHAR" || !v.s.Valid {
				return nil, false
			}
			out[i] = v.s.String
		}
		return compare(ref, p.op, out), true
	case iceberggo.Int32Type:
		out := make([]int32, len(vals))
		for i, v := range vals {
			if !integerTypes[v.typ] || !v.i.Valid || v.i.Int64 < math.MinInt32 || v.i.Int64 > math.MaxInt32 {
				return nil, false
			}
			out[i] = int32(v.i.Int64)
		}
		return compare(ref, p.op, out), true
	case iceberggo.Int64Type:
		out := make([]int64, len(vals))
		for i, v := range vals {
			if !integerTypes[v.typ] || !v.i.Valid {
				return nil, false
			}
			out[i] = v.i.Int64
		}
		return compare(ref, p.op, out), true
	case iceberggo.TimestampType, iceberggo.TimestampTzType:
		out := make([]iceberggo.Timestamp, len(vals))
		for i, v := range vals {
			switch v.typ {
			case "TIMESTAMP", "DATE", "VARCHAR":
			default:
				return nil, false
			}
			if !v.us.Valid {
				return nil, false
			}
			out[i] = iceberggo.Timestamp(v.us.Int64)
		}
		return compare(ref, p.op, out), true
	}
	return nil, false
}

// icebergOr is "or" pred p as Iceberg's expression, with vals the values
// of its constants: a disjunct keeps those of its predicates that are
// one (see planner.pred), and one with none of them makes it none.
func icebergOr(fields map[string]iceberggo.NestedField, p pred, vals []constValue) (iceberggo.BooleanExpression, bool) {
	ors := make([]iceberggo.BooleanExpression, 0, len(p.anyOf))
	for _, conj := range p.anyOf {
		var ands []iceberggo.BooleanExpression
		for _, q := range conj {
			n := len(q.constants())
			if e, ok := icebergPred(fields, q, vals[:n]); ok {
				ands = append(ands, e)
			}
			vals = vals[n:]
		}
		if len(ands) == 0 {
			return nil, false
		}
		ors = append(ors, and(ands))
	}
	if len(ors) == 1 {
		return ors[0], true
	}
	return iceberggo.NewOr(ors[0], ors[1], ors[2:]...), true
}

func compare[T iceberggo.LiteralType](ref iceberggo.UnboundTerm, op string, vals []T) iceberggo.BooleanExpression {
	switch op {
	case "=":
		return iceberggo.EqualTo(ref, vals[0])
	case "<":
		return iceberggo.LessThan(ref, vals[0])
	case "<=":
		return iceberggo.LessThanEqual(ref, vals[0])
	case ">":
		return iceberggo.GreaterThan(ref, vals[0])
	case ">=":
		return iceberggo.GreaterThanEqual(ref, vals[0])
	case "in":
		return iceberggo.IsIn(ref, vals...)
	}
	panic("BUG: operator " + op)
}

// and is the conjunction of exprs (true for none).
func and(exprs []iceberggo.BooleanExpression) iceberggo.BooleanExpression {
	switch len(exprs) {
	case 0:
		return iceberggo.AlwaysTrue{}
	case 1:
		return exprs[0]
	}
	return iceberggo.NewAnd(exprs[0], exprs[1], exprs[2:]...)
}
