package flightsql

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// A handle decodes to what was encoded; anything else is refused as not
// a handle, never half-read.
func TestHandleRoundTrip(t *testing.T) {
	f := func(h handle) {
		t.Helper()
		got, err := decodeHandle(h.encode())
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if got.scope != h.scope || got.sql != h.sql || !bytes.Equal(got.params, h.params) || (got.params == nil) != (h.params == nil) {
			t.Errorf("decoded %+v, want %+v", got, h)
		}
	}
	f(handle{scope: tenancy.One("a"), sql: allSpans})
	f(handle{scope: tenancy.Operator, sql: "SELECT 1", params: []byte{1, 2, 3}})
	f(handle{scope: tenancy.One("ünï"), sql: ""})

	good := handle{scope: tenancy.One("a"), sql: allSpans, params: []byte{9}}.encode()
	for name, b := range map[string][]byte{
		"empty":         nil,
		"other version": append([]byte{2}, good[1:]...),
		"unknown flag":  append([]byte{good[0], 2}, good[2:]...),
		"cut":           good[:len(good)-1],
		"trailing":      append(bytes.Clone(good), 0),
		"length past":   {handleVersion, 0, 0xff, 0xff, 0x03},
	} {
		if _, err := decodeHandle(b); grpcstatus.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}

// A handle is refused to any scope but its own: another tenant, and the
// operator too.
func TestHandleCheck(t *testing.T) {
	h := handle{scope: tenancy.One("a")}
	if err := h.check(tenancy.One("a")); err != nil {
		t.Errorf("own scope: %v", err)
	}
	for _, sc := range []tenancy.Scope{tenancy.One("b"), tenancy.Operator, tenancy.One("")} {
		err := h.check(sc)
		if grpcstatus.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", sc, err)
		}
		if err != nil && bytes.Contains([]byte(err.Error()), []byte("tenant a")) {
			t.Errorf("the refusal names the issuer: %v", err)
		}
	}
}

// Each bound parameter type reaches the Reader as its Go value.
func TestParameterValues(t *testing.T) {
	mem := memory.DefaultAllocator
	ts := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	dec, err := decimal128.FromString("123.45", 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	f := func(typ arrow.DataType, fill func(array.Builder), want any) {
		t.Helper()
		b := array.NewBuilder(mem, typ)
		defer b.Release()
		fill(b)
		a := b.NewArray()
		defer a.Release()
		got, err := value(a, 0)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			return
		}
		if g, ok := got.(time.Time); ok {
			if w, ok := want.(time.Time); !ok || !g.Equal(w) {
				t.Errorf("%s: %v, want %v", typ, got, want)
			}
			return
		}
		if gb, ok := got.([]byte); ok {
			if !bytes.Equal(gb, want.([]byte)) {
				t.Errorf("%s: %v, want %v", typ, got, want)
			}
			return
		}
		if got != want {
			t.Errorf("%s: %v (%T), want %v (%T)", typ, got, got, want, want)
		}
	}
	f(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).Append(-7) }, int64(-7))
	f(arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).Append(7) }, int32(7))
	f(arrow.PrimitiveTypes.Uint16, func(b array.Builder) { b.(*array.Uint16Builder).Append(7) }, uint16(7))
	f(arrow.PrimitiveTypes.Float64, func(b array.Builder) { b.(*array.Float64Builder).Append(0.5) }, 0.5)
	f(arrow.FixedWidthTypes.Boolean, func(b array.Builder) { b.(*array.BooleanBuilder).Append(true) }, true)
	f(arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).Append("x") }, "x")
	f(arrow.BinaryTypes.LargeString, func(b array.Builder) { b.(*array.LargeStringBuilder).Append("y") }, "y")
	f(arrow.BinaryTypes.Binary, func(b array.Builder) { b.(*array.BinaryBuilder).Append([]byte{1, 2}) }, []byte{1, 2})
	f(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.AppendNull() }, nil)
	f(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, func(b array.Builder) {
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
	}, ts)
	f(&arrow.TimestampType{Unit: arrow.Nanosecond}, func(b array.Builder) {
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixNano()))
	}, ts)
	f(arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).Append(arrow.Date32FromTime(ts)) },
		time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC))
	f(arrow.FixedWidthTypes.Duration_ms, func(b array.Builder) { b.(*array.DurationBuilder).Append(1500) }, 1500*time.Millisecond)
	f(&arrow.Decimal128Type{Precision: 10, Scale: 2}, func(b array.Builder) { b.(*array.Decimal128Builder).Append(dec) }, query.Decimal{Width: 10, Scale: 2, Value: dec})
	f(arrow.DenseUnionOf([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}, {Name: "i", Type: arrow.PrimitiveTypes.Int64}}, []arrow.UnionTypeCode{0, 1}),
		func(b array.Builder) {
			u := b.(*array.DenseUnionBuilder)
			u.Append(1)
			u.Child(1).(*array.Int64Builder).Append(42)
		}, int64(42))

	b := array.NewBuilder(mem, arrow.ListOf(arrow.PrimitiveTypes.Int64))
	defer b.Release()
	b.(*array.ListBuilder).Append(true)
	a := b.NewArray()
	defer a.Release()
	if _, err := value(a, 0); !errors.Is(err, errParamType) {
		t.Errorf("a list parameter: %v, want refused", err)
	}
}

// Bound parameters survive the handle: several batches, several rows.
func TestBoundParameters(t *testing.T) {
	b1, b2 := int64Batch(1, 2), int64Batch(3)
	defer b1.Release()
	defer b2.Release()
	rdr, err := array.NewRecordReader(b1.Schema(), []arrow.RecordBatch{b1, b2})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	ipc, err := bindParams(rdr)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := paramRows(ipc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][0] != int64(1) || rows[2][0] != int64(3) {
		t.Errorf("rows %v, want [[1] [2] [3]]", rows)
	}
	if rows, _ := paramRows(nil); len(rows) != 1 || rows[0] != nil {
		t.Errorf("no parameters: %v, want one run without", rows)
	}
}

// The metadata patterns: LIKE's % and _, \ escaping.
func TestPattern(t *testing.T) {
	f := func(p, s string, want bool) {
		t.Helper()
		re, err := pattern(&p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if re.MatchString(s) != want {
			t.Errorf("%q LIKE %q: %v, want %v", s, p, !want, want)
		}
	}
	f("spans", "spans", true)
	f("spans", "spans2", false)
	f("sp%", "spans", true)
	f("%an_", "spans", true)
	f("%an_", "span", false)
	f("a.c", "abc", false)
	f(`a\_c`, "a_c", true)
	f(`a\_c`, "abc", false)
	f(`100\%`, "100%", true)
	f("%", "", true)
	bad := `x\`
	if _, err := pattern(&bad); err == nil {
		t.Error("a pattern ending with an escape was taken")
	}
}

// Errors: the codes, and the paths taken out of the server's own.
func TestStatus(t *testing.T) {
	f := func(err error, code codes.Code, msg string) {
		t.Helper()
		st := grpcstatus.Convert(status(err))
		if st.Code() != code || st.Message() != msg {
			t.Errorf("%v: %v %q, want %v %q", err, st.Code(), st.Message(), code, msg)
		}
	}
	f(&tenancy.Error{Kind: tenancy.Unauthenticated, Msg: "no token"}, codes.Unauthenticated, "no token")
	f(&tenancy.Error{Kind: tenancy.Forbidden, Msg: "not yours"}, codes.PermissionDenied, "not yours")
	f(&tenancy.Error{Kind: tenancy.Invalid, Msg: "bad id"}, codes.InvalidArgument, "bad id")
	f(&query.RefusedError{Reason: "not a SELECT"}, codes.InvalidArgument, "query refused: not a SELECT")
	f(errors.Join(errors.New("run"), &query.RefusedError{Reason: "x"}), codes.InvalidArgument, "query refused: x")
	f(errors.New(`IO Error: cannot open "/var/lib/tracelake/x.parquet"`), codes.Internal, `IO Error: cannot open "<path>"`)
	f(errors.New("Binder Error: a / b and c/d"), codes.Internal, "Binder Error: a / b and c/d")
	f(errors.New("read file:///srv/data/x.duckdb: gone"), codes.Internal, "read <path>: gone")
	f(grpcstatus.Error(codes.NotFound, "no"), codes.NotFound, "no")
}
