package query

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	bindings "github.com/duckdb/duckdb-go-bindings"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// A query's result is read by DuckDB's C API, streaming or materialized
// (runQuery). Streaming, DuckDB makes each batch as the reader asks for it
// (duckdb_pending_prepared_streaming, then duckdb_fetch_chunk): a result is
// never held whole, and it costs about a quarter less CPU per row than
// computing it first (docs/BENCHMARKS.md, "2026-12-04, streamed_reads");
// but its transaction (the query's snapshot) stays open until the reader
// is released, as slowly as the client reads, and once a commit beside it
// updates rows, drops or alters a table (a merge's watermark, a column
// added) DuckDB checkpoints nothing until then: every load goes to the
// write-ahead log (TestLoadsCheckpointBesideAStreamingReadAfterAnUpdate,
// internal/sink/duckdb). So a read streams where the database is the
// reader's own (the Iceberg reader's engine, whose tables are its scans),
// and is materialized over a DuckDB sink's database, which loads go on
// beside: DuckDB computes the result when the query runs (below the
// loads' priority), its transaction ends there, and the batches are
// fetched from it (within memory_limit, spilled to DuckDB's temporary
// directory past it).
//
// duckdb-go runs every statement materialized and has no streaming call,
// so the statement is prepared and its parameters bound by duckdb-go
// (PrepareContext, BindWithCtx: its conversions of Go values), and run by
// the C API on its handles, which duckdb-go keeps unexported, read through
// duckdbHandles.

// duckdbHandles are the offsets of the C handles inside duckdb-go's Conn
// and Stmt, checked against the fields' names and types once: a duckdb-go
// release that moved them fails every read with errHandles (and the
// tests), never reads a wrong field. go.mod pins the release checked.
var duckdbHandles = sync.OnceValues(func() (handleOffsets, error) {
	conn, ok1 := fieldOffset[duckdb.Conn, bindings.Connection]("conn")
	stmt, ok2 := fieldOffset[duckdb.Stmt, *bindings.PreparedStatement]("preparedStmt")
	if !ok1 || !ok2 {
		return handleOffsets{}, errHandles
	}
	return handleOffsets{conn: conn, stmt: stmt}, nil
})

var errHandles = errors.New("BUG: this duckdb-go release keeps its connection and statement handles elsewhere: the read path cannot run queries (see internal/query/duckdb_result.go)")

type handleOffsets struct{ conn, stmt uintptr }

// interruptEvery is how often a read whose context ended interrupts
// DuckDB again while it is not released.
const interruptEvery = 100 * time.Millisecond

// fieldOffset is the offset of T's field name if it has type F.
func fieldOffset[T, F any](name string) (uintptr, bool) {
	f, ok := reflect.TypeFor[T]().FieldByName(name)
	if !ok || f.Type != reflect.TypeFor[F]() || len(f.Index) != 1 {
		return 0, false
	}
	return f.Offset, true
}

// runQuery runs text with params on dc (a duckdb-go connection, which the
// caller holds until the reader is released), its result streaming or
// materialized. ctx interrupts the query while it runs and while its
// batches are read.
//
// names, when there are as many as the result has columns, name them:
// those DuckDB gives the query the caller sent (session.names), which
// the text that runs, rewritten, may name otherwise.
//
// zonedText reads each column of the result that is a TIME WITH TIME
// ZONE as text, as DuckDB writes it (12:34:56+05:30; see zonedColumns).
func runQuery(ctx context.Context, dc driver.Conn, text string, params []any, stream bool, names []string, zonedText bool) (*resultReader, error) {
	offs, err := duckdbHandles()
	if err != nil {
		return nil, err
	}
	c, ok := dc.(*duckdb.Conn)
	if !ok {
		return nil, fmt.Errorf("BUG: not a duckdb-go connection: %T", dc)
	}
	ds, err := c.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	stmt := ds.(*duckdb.Stmt)
	if n := stmt.NumInput(); len(params) > n {
		// DuckDB's bind leaves the values past its placeholders unread:
		// the query would run without what the caller meant by them.
		stmt.Close()
		return nil, &RefusedError{Reason: fmt.Sprintf("bind the parameters: %d values for %d placeholders", len(params), n)}
	}
	args := make([]driver.NamedValue, len(params))
	decimals := map[int]Decimal{}
	for i, p := range params {
		if d, ok := p.(Decimal); ok && i < stmt.NumInput() {
			// duckdb-go binds no decimal: NULL for now, the decimal
			// itself below, by DuckDB's C API.
			decimals[i], p = d, nil
		}
		v := bindable(p)
		if i < stmt.NumInput() {
			if typ, err := stmt.ParamType(i + 1); err == nil {
				v = timeArg(typ, v)
			}
		}
		args[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	if err := stmt.BindWithCtx(ctx, args); err != nil {
		stmt.Close()
		if ctx.Err() != nil {
			return nil, err
		}
		// The values a caller sent do not fit the placeholders (too few,
		// or of a type DuckDB does not take where they stand): the
		// caller's mistake, not the engine's.
		return nil, &RefusedError{Reason: "bind the parameters: " + err.Error()}
	}
	conn := *(*bindings.Connection)(unsafe.Add(unsafe.Pointer(c), offs.conn))
	prepared := *(**bindings.PreparedStatement)(unsafe.Add(unsafe.Pointer(stmt), offs.stmt))
	for i, d := range decimals {
		v := bindings.NewDecimal(d.Width, d.Scale, bindings.NewHugeInt(d.Value.LowBits(), d.Value.HighBits()))
		if bindings.BindDecimal(*prepared, bindings.IdxT(i+1), v) == bindings.StateError {
			stmt.Close()
			return nil, &RefusedError{Reason: fmt.Sprintf("bind parameter %d, %s: %s", i+1, d, bindings.PrepareError(*prepared))}
		}
	}
	r := &resultReader{ctx: ctx, stmt: stmt, closing: make(chan struct{})}
	r.refs.Store(1)
	pend := bindings.PendingPrepared
	if stream {
		pend = bindings.PendingPreparedStreaming
	}
	if pend(*prepared, &r.pending) == bindings.StateError {
		err := &duckdb.Error{Type: duckdb.ErrorTypeInvalid, Msg: bindings.PendingError(r.pending)}
		r.close()
		return nil, err
	}
	// DuckDB is interrupted once ctx ends, and again every
	// interruptEvery (DuckDB clears a connection's interrupt in places:
	// duckdb-go repeats it too), until the reader is released; under mu,
	// never once the caller may close the connection. Not before the
	// pending call: a query clears its connection's interrupt as it
	// starts.
	r.stopInterrupt = context.AfterFunc(ctx, func() {
		t := time.NewTicker(interruptEvery)
		defer t.Stop()
		for {
			if !r.interrupt(conn) {
				return
			}
			select {
			case <-t.C:
			case <-r.closing:
				return
			}
		}
	})
	if bindings.ExecutePending(r.pending, &r.res) == bindings.StateError {
		err := r.resultError()
		r.close()
		return nil, err
	}
	r.opts = bindings.ResultGetArrowOptions(&r.res)
	n := bindings.ColumnCount(&r.res)
	named := bindings.IdxT(len(names)) == n
	if !named {
		names = make([]string, n)
	}
	types := make([]bindings.LogicalType, n)
	for i := range n {
		if !named {
			names[i] = bindings.ColumnName(&r.res, i)
		}
		types[i] = bindings.ColumnLogicalType(&r.res, i)
	}
	schema, ed := bindings.NewArrowSchema(r.opts, types, names)
	widen := make([]*widening, n)
	zoned := make([]bool, n)
	for i := range types {
		if widen[i] = wideningOf(types[i]); widen[i] != nil {
			r.widen = widen
		}
		if zonedText && bindings.GetTypeId(types[i]) == bindings.TypeTimeTZ {
			zoned[i] = true
			r.zoned = zoned
		}
		bindings.DestroyLogicalType(&types[i])
	}
	if err := errorData(ed); err != nil {
		r.close()
		return nil, fmt.Errorf("the result's Arrow schema: %w", err)
	}
	if r.widen != nil || r.zoned != nil {
		// DuckDB's own schema stays the one its batches are converted
		// with; the reader's has each UHUGEINT widened (a HUGEINT kept)
		// and each TIME WITH TIME ZONE as text.
		r.duckSchema = schema
		fields := schema.Fields()
		for i := range fields {
			if fields[i].Type, err = widenedType(fields[i].Type, widen[i]); err != nil {
				r.close()
				return nil, fmt.Errorf("the result's Arrow schema: %w", err)
			}
			if zoned[i] {
				fields[i].Type = arrow.BinaryTypes.String
			}
		}
		md := schema.Metadata()
		schema = arrow.NewSchema(fields, &md)
	}
	r.schema = schema
	return r, nil
}

// bindable is a parameter's value as duckdb-go binds it: a
// time.Duration is DuckDB's INTERVAL (to the microsecond, DuckDB's
// resolution); duckdb-go takes no time.Duration.
func bindable(p any) any {
	if d, ok := p.(time.Duration); ok {
		return duckdb.Interval{Micros: d.Microseconds()}
	}
	return p
}

// timeArg is v, a value bound to a placeholder of type typ, with a time
// bound to a DATE or a TIME taken as its instant in UTC, as a TIMESTAMP
// placeholder takes it and DuckDB casts a timestamp: a DATE as the
// midnight (UTC) of its day in UTC, a TIME in UTC. duckdb-go binds a time
// to a DATE as its seconds since 1970 divided by a day's, which truncates
// toward 1970 (a time before 1970 and not at midnight was bound as the
// next day), and to a TIME as its clock in its own location (12:00 in New
// York as 12:00, where a TIMESTAMP placeholder takes 17:00).
func timeArg(typ duckdb.Type, v any) any {
	t, ok := v.(time.Time)
	if !ok {
		return v
	}
	switch typ {
	case duckdb.TYPE_DATE:
		t = t.UTC()
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case duckdb.TYPE_TIME:
		return t.UTC()
	}
	return v
}

// paramTypes are the types DuckDB infers for the placeholders of text, a
// statement prepared on conn (not run).
func paramTypes(ctx context.Context, conn *sql.Conn, text string) ([]duckdb.Type, error) {
	var types []duckdb.Type
	err := conn.Raw(func(dc any) error {
		st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, text)
		if err != nil {
			return err
		}
		defer st.Close()
		stmt := st.(*duckdb.Stmt)
		for i := range stmt.NumInput() {
			typ, err := stmt.ParamType(i + 1)
			if err != nil {
				return err
			}
			types = append(types, typ)
		}
		return nil
	})
	return types, err
}

// resultReader reads a result's batches: each batch is valid until the
// next Next (Retain it to keep it), as arrow's readers go.
type resultReader struct {
	ctx           context.Context
	stmt          *duckdb.Stmt
	pending       bindings.PendingResult
	res           bindings.Result       // destroyed even when it holds an error
	opts          bindings.ArrowOptions // zero until the query ran
	schema        *arrow.Schema
	duckSchema    *arrow.Schema // DuckDB's schema, when widen or zoned is set
	widen         []*widening   // per column: where it holds a UHUGEINT or a HUGEINT; nil: no column does
	zoned         []bool        // per column: a TIME WITH TIME ZONE, read as text; nil: no column is
	stopInterrupt func() bool
	refs          atomic.Int64
	mu            sync.Mutex    // the interrupt against close
	closing       chan struct{} // closed by close, under mu: no interrupt after it

	cur  arrow.RecordBatch
	err  error
	done bool
}

func (r *resultReader) Schema() *arrow.Schema { return r.schema }

func (r *resultReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done || r.err != nil {
		return false
	}
	// An ended read ends here, whatever DuckDB still holds made.
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return false
	}
	chunk := bindings.FetchChunk(r.res)
	if chunk.Ptr == nil {
		// The end of the result, or its failure: a result cut short is
		// never taken for a whole one.
		r.done = true
		if bindings.ResultError(&r.res) != "" {
			r.err = r.resultError()
		}
		return false
	}
	defer bindings.DestroyDataChunk(&chunk)
	schema := r.schema
	if r.duckSchema != nil {
		schema = r.duckSchema
	}
	rec, ed := bindings.DataChunkToArrowArray(r.opts, schema, chunk)
	if err := errorData(ed); err != nil {
		r.err = fmt.Errorf("a batch of the result as Arrow: %w", err)
		return false
	}
	if r.widen != nil {
		var err error
		if rec, err = r.widened(rec); err != nil {
			r.err = err
			return false
		}
	}
	if r.zoned != nil {
		rec = r.zonedColumns(rec, chunk)
	}
	r.cur = rec
	return true
}

// widened is rec, a batch of DuckDB's, with each UHUGEINT column (or
// UHUGEINT inside one) as the reader's schema has it, or the error of a
// HUGEINT of 39 digits in it (or inside one), which names the column;
// rec is released.
func (r *resultReader) widened(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	defer rec.Release()
	cols := make([]arrow.Array, rec.NumCols())
	for i, col := range rec.Columns() {
		data, err := widenedData(memory.DefaultAllocator, col.Data(), col.DataType(), r.widen[i])
		if err != nil {
			return nil, &RefusedError{Reason: fmt.Sprintf("column %q: %v", r.schema.Field(i).Name, err)}
		}
		cols[i] = array.MakeFromData(data)
		data.Release()
		defer cols[i].Release()
	}
	schema := r.schema
	if r.zoned != nil {
		// A TIME WITH TIME ZONE column is still DuckDB's here: text
		// once zonedColumns has read it.
		fields := schema.Fields()
		for i, zoned := range r.zoned {
			if zoned {
				fields[i].Type = cols[i].DataType()
			}
		}
		md := schema.Metadata()
		schema = arrow.NewSchema(fields, &md)
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows()), nil
}

// zonedColumns is rec, a batch of chunk, with each TIME WITH TIME ZONE
// column (r.zoned) as text, read from chunk itself: DuckDB's Arrow writes
// such a value as a time64 of its clock alone, its offset lost
// (12:34:56+05:30 and 12:34:56-08 both 12:34:56), and Arrow has no type
// of a time of day with an offset. Each value is written as DuckDB casts
// it to VARCHAR, as the read path's query does (session.zonedAsText);
// rec is released.
func (r *resultReader) zonedColumns(rec arrow.RecordBatch, chunk bindings.DataChunk) arrow.RecordBatch {
	defer rec.Release()
	n := int(bindings.DataChunkGetSize(chunk))
	cols := make([]arrow.Array, rec.NumCols())
	for i, col := range rec.Columns() {
		if !r.zoned[i] {
			col.Retain()
			cols[i] = col
			defer cols[i].Release()
			continue
		}
		vec := bindings.DataChunkGetVector(chunk, bindings.IdxT(i))
		validity := bindings.VectorGetValidity(vec)
		var values []bindings.TimeTZ
		if n > 0 {
			values = unsafe.Slice((*bindings.TimeTZ)(bindings.VectorGetData(vec)), n)
		}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.Reserve(n)
		for row := range n {
			// A nil validity mask: every value is valid.
			if validity != nil && !bindings.ValidityRowIsValid(validity, bindings.IdxT(row)) {
				b.AppendNull()
				continue
			}
			v := bindings.CreateTimeTZValue(values[row])
			b.Append(bindings.GetVarchar(v))
			bindings.DestroyValue(&v)
		}
		cols[i] = b.NewArray()
		b.Release()
		defer cols[i].Release()
	}
	return array.NewRecordBatch(r.schema, cols, int64(n))
}

func (r *resultReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch (arrow's older name).
func (r *resultReader) Record() arrow.RecordBatch { return r.cur }

func (r *resultReader) Err() error { return r.err }

func (r *resultReader) Retain() { r.refs.Add(1) }

func (r *resultReader) Release() {
	if r.refs.Add(-1) == 0 {
		r.close()
	}
}

// resultError is the error of the result, the context's when it ended
// the query.
func (r *resultReader) resultError() error {
	return duckdbResultError(r.ctx, &duckdb.Error{Type: duckdb.ErrorType(bindings.ResultErrorType(&r.res)), Msg: bindings.ResultError(&r.res)})
}

// errWorkerFailed is a streaming result DuckDB stopped as interrupted
// though the read did not end: the query failed on one of DuckDB's
// worker threads, which raises the connection's interrupt flag to stop
// the others, and DuckDB 1.5's streaming fetch throws on that flag
// before it asks for the worker's error (SimpleBufferedData::
// ExecuteTaskInternal against Executor::PushError). Its cause is lost.
var errWorkerFailed = errors.New("the query failed in one of DuckDB's threads while its result streamed, and DuckDB reported only that it stopped, not why: run it again to see its error")

// duckdbResultError is err, DuckDB's error of a result read under ctx,
// as the caller gets it: with ctx's error where it ended the read (the
// interrupt is ours), errWorkerFailed for an interrupt that is not.
func duckdbResultError(ctx context.Context, err *duckdb.Error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return errors.Join(ctxErr, err)
	}
	if err.Type == duckdb.ErrorTypeInterrupt {
		return fmt.Errorf("%w (%w)", errWorkerFailed, err)
	}
	return err
}

// close frees the batch, the result (ending its transaction) and the
// statement.
func (r *resultReader) close() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.stopInterrupt != nil {
		r.stopInterrupt()
	}
	r.mu.Lock()
	select {
	case <-r.closing:
	default:
		close(r.closing)
	}
	r.mu.Unlock()
	bindings.DestroyArrowOptions(&r.opts)
	bindings.DestroyResult(&r.res)
	bindings.DestroyPending(&r.pending)
	r.stmt.Close()
}

// interrupt interrupts DuckDB on conn unless the reader is closed, which
// it reports.
func (r *resultReader) interrupt(conn bindings.Connection) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closing:
		return false
	default:
		bindings.Interrupt(conn)
		return true
	}
}

// errorData is DuckDB's error data as an error, nil when it holds none.
func errorData(ed bindings.ErrorData) error {
	defer bindings.DestroyErrorData(&ed)
	if !bindings.ErrorDataHasError(ed) {
		return nil
	}
	return &duckdb.Error{Type: duckdb.ErrorType(bindings.ErrorDataErrorType(ed)), Msg: bindings.ErrorDataMessage(ed)}
}

// RunArrow runs text (statements; the result is the last one's, the
// others run first) on dc, a duckdb-go connection the caller holds until
// the reader is released, its result streaming, read as the read path
// reads one: a UHUGEINT as the number stored (see widening), which
// duckdb-go's Arrow reads as a negative number from 2^127 up, and a
// HUGEINT of 39 digits, past its decimal(38, 0), as an error. For the
// operator's tools on a database of their own (tracelake sql on a stopped
// file): nothing is checked. A TIME WITH TIME ZONE column is text as
// DuckDB writes it (12:34:56+05:30), as the read path answers it
// (session.zonedAsText): DuckDB's Arrow drops the offset.
func RunArrow(ctx context.Context, dc driver.Conn, text string) (array.RecordReader, error) {
	return runQuery(ctx, dc, text, nil, true, nil, true)
}
