package flightsql

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/query"
)

// Parameters are bound as record batches (DoPut on a prepared statement):
// one column per placeholder, one row per execution. The server keeps
// them in the statement's handle as an Arrow IPC stream and hands them to
// Reader.Query as Go values.

// bindParams reads the parameter batches a client sends into the IPC
// stream a handle carries; nil when they hold no row. Each value is
// checked now, so that a parameter of a type the server cannot pass is
// refused when bound rather than when run. The batches' messages were
// checked as they arrived (checkDoPut); one a client forged otherwise
// may still panic the reader: that is a refusal, not the end of the
// process.
func bindParams(rdr array.RecordReader) (_ []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = grpcstatus.Errorf(codes.InvalidArgument, "read the bound parameters: %v", p)
		}
	}()
	var (
		buf  bytes.Buffer
		w    *ipc.Writer
		rows int64
	)
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() > maxParamRows-rows {
			return nil, errManyRows
		}
		if _, err := rowValues(rec, nil); err != nil {
			return nil, err
		}
		if w == nil {
			w = ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(alloc))
		}
		if err := w.Write(rec); err != nil {
			return nil, fmt.Errorf("keep the bound parameters: %w", err)
		}
		rows += rec.NumRows()
		if buf.Len() > maxParamBytes {
			return nil, grpcstatus.Errorf(codes.InvalidArgument, "the bound parameters take more than %d bytes", maxParamBytes)
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "read the bound parameters: %v", err)
	}
	if w == nil || rows == 0 {
		return nil, nil
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("keep the bound parameters: %w", err)
	}
	return buf.Bytes(), nil
}

// paramRows are the executions a handle's parameters ask for: one list
// of values per bound row; one execution without parameters when none
// are bound. A handle is not signed (see handle), so b is whatever a
// caller sent: it is checked before arrow-go reads it (checkIPCStream),
// and a panic of the reader over a forged batch is a refusal.
func paramRows(b []byte) (rows [][]any, err error) {
	if b == nil {
		return [][]any{nil}, nil
	}
	if checkIPCStream(b) != nil {
		return nil, errBadHandle
	}
	defer func() {
		if p := recover(); p != nil {
			rows, err = nil, errBadHandle
		}
	}()
	r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(alloc))
	if err != nil {
		return nil, errBadHandle
	}
	defer r.Release()
	for r.Next() {
		if rows, err = rowValues(r.RecordBatch(), rows); err != nil {
			return nil, err
		}
	}
	if r.Err() != nil {
		return nil, errBadHandle
	}
	return rows, nil
}

// maxParamRows bounds the rows of parameters bound to a statement: each
// runs the query once, and a batch declares as many rows as it likes (a
// column of nulls takes no bytes).
const maxParamRows = 1024

var errManyRows = grpcstatus.Errorf(codes.InvalidArgument, "more than %d rows of parameters: run the statement in parts", maxParamRows)

// rowValues appends the values of each row of rec to rows.
func rowValues(rec arrow.RecordBatch, rows [][]any) ([][]any, error) {
	if rec.NumRows() > maxParamRows-int64(len(rows)) {
		return nil, errManyRows
	}
	for i := range int(rec.NumRows()) {
		row := make([]any, rec.NumCols())
		for c, col := range rec.Columns() {
			v, err := value(col, i)
			if err != nil {
				return nil, grpcstatus.Errorf(codes.InvalidArgument, "parameter %d (%s): %v", c+1, rec.Schema().Field(c).Name, err)
			}
			row[c] = v
		}
		rows = append(rows, row)
	}
	return rows, nil
}

var errParamType = errors.New("type not supported as a parameter")

// maxDecimalWidth is the most digits of DuckDB's DECIMAL.
const maxDecimalWidth = 38

// decimalValue is a decimal parameter as the Reader binds it: a
// query.Decimal, which keeps its scale (its text would be cast to its
// placeholder's type, 4.5 to a BIGINT's 5); its text where DuckDB has no
// DECIMAL of its precision and scale (a negative scale, or wider than 38
// digits).
func decimalValue(v decimal128.Num, precision, scale int32, text string) any {
	if precision < 1 || precision > maxDecimalWidth || scale < 0 || scale > precision {
		return text
	}
	return query.Decimal{Width: uint8(precision), Scale: uint8(scale), Value: v}
}

// value is the Go value of a[i] as Reader.Query takes it: nil, bool,
// the integer and float types, string, []byte, time.Time (dates, times of
// day on 1970-01-01, timestamps in UTC or their zone), time.Duration, and
// decimals as query.Decimal (as their exact text past DuckDB's DECIMAL).
func value(a arrow.Array, i int) (any, error) {
	// An array of the null type (pyarrow's for None) has no validity
	// bitmap, so IsNull says false of its values: every one is NULL.
	if a.IsNull(i) || a.DataType().ID() == arrow.NULL {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int8:
		return a.Value(i), nil
	case *array.Int16:
		return a.Value(i), nil
	case *array.Int32:
		return a.Value(i), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Uint8:
		return a.Value(i), nil
	case *array.Uint16:
		return a.Value(i), nil
	case *array.Uint32:
		return a.Value(i), nil
	case *array.Uint64:
		return a.Value(i), nil
	case *array.Float16:
		return a.Value(i).Float32(), nil
	case *array.Float32:
		return a.Value(i), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.StringView:
		return a.Value(i), nil
	case *array.Binary:
		return slices.Clone(a.Value(i)), nil
	case *array.LargeBinary:
		return slices.Clone(a.Value(i)), nil
	case *array.BinaryView:
		return slices.Clone(a.Value(i)), nil
	case *array.FixedSizeBinary:
		return slices.Clone(a.Value(i)), nil
	case *array.Date32:
		return a.Value(i).ToTime(), nil
	case *array.Date64:
		return a.Value(i).ToTime(), nil
	case *array.Time32:
		return a.Value(i).ToTime(a.DataType().(*arrow.Time32Type).Unit), nil
	case *array.Time64:
		return a.Value(i).ToTime(a.DataType().(*arrow.Time64Type).Unit), nil
	case *array.Timestamp:
		toTime, err := a.DataType().(*arrow.TimestampType).GetToTimeFunc()
		if err != nil {
			return nil, err
		}
		return toTime(a.Value(i)), nil
	case *array.Duration:
		// Past time.Duration's range (±292 years) the product wraps
		// around: the value would be bound as another interval.
		v, m := int64(a.Value(i)), int64(a.DataType().(*arrow.DurationType).Unit.Multiplier())
		if v > math.MaxInt64/m || v < math.MinInt64/m {
			return nil, fmt.Errorf("a duration of %d %s: past ±292 years, the most a duration parameter holds", v, a.DataType().(*arrow.DurationType).Unit)
		}
		return time.Duration(v * m), nil
	case *array.Decimal128:
		dt := a.DataType().(*arrow.Decimal128Type)
		return decimalValue(a.Value(i), dt.Precision, dt.Scale, a.Value(i).ToString(dt.Scale)), nil
	case *array.Decimal256:
		dt := a.DataType().(*arrow.Decimal256Type)
		v := a.Value(i)
		if dt.Precision > maxDecimalWidth {
			return v.ToString(dt.Scale), nil
		}
		return decimalValue(decimal128.FromBigInt(v.BigInt()), dt.Precision, dt.Scale, v.ToString(dt.Scale)), nil
	case array.Union:
		// A client that takes the parameter types as unions (or a
		// server that declared them so) sends the value in one child.
		var child int
		if d, ok := a.(*array.DenseUnion); ok {
			child = int(d.ValueOffset(i))
		} else {
			child = i
		}
		return value(a.Field(a.ChildID(i)), child)
	case *array.Dictionary:
		return value(a.Dictionary(), a.GetValueIndex(i))
	}
	return nil, fmt.Errorf("%w: %s", errParamType, a.DataType())
}
