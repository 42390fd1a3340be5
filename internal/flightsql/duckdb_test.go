package flightsql

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	adbcfs "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"

	"github.com/tracelake/tracelake/internal/query"
)

// duckRows is tenant a's spans in the DuckDB test: more than DuckDB's
// 2048-row vectors, so the result comes in several batches.
const duckRows = 5000

// duckLake is the DuckDB read path over a database of spans: tenant a's
// duckRows (span-0…, duration_ms 0…) and tenant b's 10 secrets.
func duckLake(t *testing.T) query.Reader {
	t.Helper()
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE otel_spans (tenant_id VARCHAR, name VARCHAR, duration_ms BIGINT)`,
		`INSERT INTO otel_spans SELECT 'a', 'span-' || i, i FROM range(5000) t(i)`,
		`INSERT INTO otel_spans SELECT 'b', 'secret-' || i, i FROM range(10) t(i)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The DuckDB read path through Flight SQL, as ADBC and database/sql read
// it: a tenant's rows in several batches and no other's, a prepared
// statement with a parameter, the tables listed, a refusal of the
// engine's as InvalidArgument.
func TestDuckDB(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	uri := "grpc+tcp://" + s.Addr
	c := adbcConn(t, uri, "a", "tok-a", nil)
	ctx := context.Background()

	got := runQuery(t, c, "SELECT name, duration_ms FROM otel_spans ORDER BY duration_ms")
	if len(got.names) != duckRows || got.names[0] != "span-0" || got.batches < 2 {
		t.Errorf("tenant a: %d rows in %d batches, first %q; want %d rows in several", len(got.names), got.batches, got.names[:min(1, len(got.names))], duckRows)
	}
	if slices.ContainsFunc(got.names, func(n string) bool { return strings.HasPrefix(n, "secret") }) {
		t.Error("tenant a read tenant b's rows")
	}
	if got := runQuery(t, adbcConn(t, uri, "b", "tok-b", nil), "SELECT name, duration_ms FROM otel_spans"); len(got.names) != 10 {
		t.Errorf("tenant b: %d rows, want 10", len(got.names))
	}

	st := statement(t, c, "SELECT name, duration_ms FROM otel_spans WHERE duration_ms >= ? ORDER BY duration_ms")
	if err := st.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if got := runBound(t, st, duckRows-3); !slices.Equal(got.names, []string{"span-4997", "span-4998", "span-4999"}) {
		t.Errorf("prepared, duration_ms >= %d: %v", duckRows-3, got.names)
	}

	db := sqlDB(t, "uri="+uri+";"+adbcfs.OptionRPCCallHeaderPrefix+"x-scope-orgid=a;"+adbcfs.OptionAuthorizationHeader+"=Bearer tok-a")
	prep, err := db.PrepareContext(ctx, "SELECT name, duration_ms FROM otel_spans WHERE duration_ms >= $1 ORDER BY duration_ms")
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Close()
	rows, err := prep.QueryContext(ctx, int64(duckRows-1))
	if err != nil {
		t.Fatal(err)
	}
	if got := scanSpans(t, rows); !slices.Equal(got, []string{"span-4999"}) {
		t.Errorf("database/sql, duration_ms >= %d: %v", duckRows-1, got)
	}

	if got, want := objects(t, c, nil), []string{"tracelake.main.otel_spans(tenant_id,name,duration_ms)"}; !slices.Equal(got, want) {
		t.Errorf("tenant a's objects %v, want %v", got, want)
	}

	cl := client(t, s.Addr)
	info, err := cl.Execute(as("a", "tok-a"), "SELECT * FROM read_csv('/etc/passwd')")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fetch(as("a", "tok-a"), t, cl, info)
	wantCode(t, "read_csv", err, codes.InvalidArgument)
	_, err = cl.Prepare(as("a", "tok-a"), "SELECT nope FROM otel_spans")
	wantCode(t, "prepare with an unknown column", err, codes.InvalidArgument)
}

// A batch of DuckDB's too large for one message goes out in slices of its
// rows; a UNION column, at the top or inside a struct or list, is sliced
// with the rest: every row arrives once, in order, with its own value
// (arrow-go's IPC writer failed the stream at the first slice of a union
// past a batch's start).
func TestSlicedBatchesWithUnionColumns(t *testing.T) {
	const rows = 4096 // two of DuckDB's vectors, each ~10 MiB: several slices
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE otel_spans (tenant_id VARCHAR, i BIGINT, s VARCHAR, u UNION(n BIGINT, t VARCHAR))`,
		`INSERT INTO otel_spans SELECT 'a', i, repeat('x', 2600),
			CASE WHEN i % 2 = 0 THEN union_value(n := i)::UNION(n BIGINT, t VARCHAR)
			ELSE union_value(t := 't' || i)::UNION(n BIGINT, t VARCHAR) END
			FROM range(4096) t(i)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	duck, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	cl := client(t, s.Addr)
	ctx := as("a", "tok-a")
	for _, tc := range []struct {
		sql  string
		want func(i int64) string
	}{
		{"SELECT i, u, s FROM otel_spans ORDER BY i", func(i int64) string {
			if i%2 == 0 {
				return fmt.Sprintf("[0,%d]", i)
			}
			return fmt.Sprintf(`[1,"t%d"]`, i)
		}},
		{"SELECT i, {'x': u} AS u, s FROM otel_spans ORDER BY i", func(i int64) string {
			if i%2 == 0 {
				return fmt.Sprintf(`{"x":[0,%d]}`, i)
			}
			return fmt.Sprintf(`{"x":[1,"t%d"]}`, i)
		}},
		{"SELECT i, [u] AS u, s FROM otel_spans ORDER BY i", func(i int64) string {
			if i%2 == 0 {
				return fmt.Sprintf(`[[0,%d]]`, i)
			}
			return fmt.Sprintf(`[[1,"t%d"]]`, i)
		}},
	} {
		rdr := open(ctx, t, cl, tc.sql)
		var next int64
		batches := 0
		for rdr.Next() {
			rec := rdr.RecordBatch()
			batches++
			for k := range int(rec.NumRows()) {
				i := rec.Column(0).(*array.Int64).Value(k)
				if i != next {
					t.Fatalf("%s: row %d has i %d", tc.sql, next, i)
				}
				if got, want := rec.Column(1).ValueStr(k), tc.want(i); got != want {
					t.Fatalf("%s: row %d: %s, want %s", tc.sql, i, got, want)
				}
				next++
			}
		}
		if err := rdr.Err(); err != nil {
			t.Errorf("%s: after %d rows: %v", tc.sql, next, err)
		}
		rdr.Release()
		if next != rows || batches <= 2 {
			t.Errorf("%s: %d rows in %d batches, want %d in slices", tc.sql, next, batches, rows)
		}
	}
}

// A parameter of Arrow's null type (what pyarrow makes of None, so
// Python's ADBC driver binds it for a NULL) is NULL, as DuckDB takes it,
// not a type refused.
func TestNullTypedParameterIsNull(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	ctx := context.Background()

	st := statement(t, c, "SELECT name, duration_ms FROM otel_spans WHERE duration_ms = coalesce(?, 4999)")
	if err := st.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	nulls := array.NewNull(1)
	defer nulls.Release()
	params := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.Null, Nullable: true}}, nil), []arrow.Array{nulls}, 1)
	defer params.Release()
	if err := st.Bind(ctx, params); err != nil {
		t.Fatal(err)
	}
	rdr, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		t.Fatalf("a NULL parameter: %v", err)
	}
	got, err := readSpans(rdr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.names, []string{"span-4999"}) {
		t.Errorf("duration_ms = coalesce(NULL, 4999): %v, want span-4999", got.names)
	}
}

// A duration parameter (Arrow's duration, any unit) compares with
// DuckDB's INTERVAL as the same interval written in the query does.
func TestDurationParameterIsAnInterval(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	cl := client(t, s.Addr)
	ctx := as("a", "tok-a")

	p, err := cl.Prepare(ctx, "SELECT name FROM otel_spans WHERE to_milliseconds(duration_ms) = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.FixedWidthTypes.Duration_us}}, nil))
	defer b.Release()
	b.Field(0).(*array.DurationBuilder).Append(4_999_000) // 4999 ms
	params := b.NewRecordBatch()
	defer params.Release()
	p.SetParameters(params)
	info, err := p.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch(ctx, t, cl, info)
	if err != nil {
		t.Fatalf("a duration parameter: %v", err)
	}
	if !slices.Equal(got.names, []string{"span-4999"}) {
		t.Errorf("to_milliseconds(duration_ms) = 4999ms: %v, want span-4999", got.names)
	}
}

// A parameter DuckDB cannot bind (a time where the query compares a
// string; too few or too many values for the placeholders) is the caller's mistake,
// InvalidArgument, not the server's.
func TestUnbindableParameterIsInvalidArgument(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	cl := client(t, s.Addr)
	ctx := as("a", "tok-a")

	for _, tc := range []struct {
		what, sql string
		params    arrow.RecordBatch
	}{
		{"a time for a string", "SELECT name FROM otel_spans WHERE name = ?", func() arrow.RecordBatch {
			b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.FixedWidthTypes.Time64us}}, nil))
			defer b.Release()
			b.Field(0).(*array.Time64Builder).Append(1)
			return b.NewRecordBatch()
		}()},
		{"one value for two placeholders", "SELECT name FROM otel_spans WHERE duration_ms BETWEEN ? AND ?", int64Batch(1)},
		// DuckDB's bind leaves values past its placeholders unread: the
		// query would run without the condition the caller meant.
		{"two values for one placeholder", "SELECT name FROM otel_spans WHERE duration_ms = ?", func() arrow.RecordBatch {
			b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
				{Name: "1", Type: arrow.PrimitiveTypes.Int64}, {Name: "2", Type: arrow.PrimitiveTypes.Int64}}, nil))
			defer b.Release()
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).(*array.Int64Builder).Append(2)
			return b.NewRecordBatch()
		}()},
		{"no value bound", "SELECT name FROM otel_spans WHERE duration_ms = ?", nil},
	} {
		p, err := cl.Prepare(ctx, tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		if tc.params != nil {
			p.SetParameters(tc.params)
			tc.params.Release()
		}
		info, err := p.Execute(ctx)
		if err == nil {
			_, err = fetch(ctx, t, cl, info)
		}
		wantCode(t, tc.what, err, codes.InvalidArgument)
		p.Close(ctx)
	}
}

// A decimal parameter compares as the decimal it is, as DuckDB compares
// the same decimal written in the query: with an integer column, 4.5 is
// not 5 (sent as its text, DuckDB cast it to the column's BIGINT, 5).
func TestDecimalParameterKeepsItsScale(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	cl := client(t, s.Addr)
	ctx := as("a", "tok-a")

	for _, tc := range []struct {
		sql  string
		want []string // DuckDB's answer with 4.5::DECIMAL(10,1) in place of ?
	}{
		{"SELECT name FROM otel_spans WHERE duration_ms = ?", nil},
		{"SELECT name FROM otel_spans WHERE duration_ms <= ? AND duration_ms > 2 ORDER BY duration_ms", []string{"span-3", "span-4"}},
		{"SELECT name FROM otel_spans WHERE duration_ms BETWEEN 4 AND ? ORDER BY duration_ms", []string{"span-4"}},
	} {
		p, err := cl.Prepare(ctx, tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "1", Type: &arrow.Decimal128Type{Precision: 10, Scale: 1}}}, nil))
		b.Field(0).(*array.Decimal128Builder).Append(decimal128.FromI64(45))
		params := b.NewRecordBatch()
		b.Release()
		p.SetParameters(params)
		params.Release()
		info, err := p.Execute(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fetch(ctx, t, cl, info)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if !slices.Equal(got.names, tc.want) {
			t.Errorf("%s with 4.5: %v, want %v", tc.sql, got.names, tc.want)
		}
		p.Close(ctx)
	}
}

// Through ADBC's database/sql adapter, which takes for each parameter the
// Go type of its declared Arrow type only (sqldriver isCorrectParamType):
// a uint64 binds for an unsigned column (declared a string, the adapter
// refused it). (The adapter takes no time.Time for a timestamp nor any
// decimal whatever is declared; ADBC's statements bind Arrow arrays of
// the declared types, TestParameterTypes in internal/query.)
func TestUnsignedParameterThroughDatabaseSQL(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	db := sqlDB(t, "uri=grpc+tcp://"+s.Addr+";"+adbcfs.OptionRPCCallHeaderPrefix+"x-scope-orgid=a;"+adbcfs.OptionAuthorizationHeader+"=Bearer tok-a")
	ctx := context.Background()
	prep, err := db.PrepareContext(ctx, "SELECT name, duration_ms FROM otel_spans WHERE duration_ms::UBIGINT = $1")
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Close()
	rows, err := prep.QueryContext(ctx, uint64(4999))
	if err != nil {
		t.Fatalf("a uint64 for a UBIGINT: %v", err)
	}
	if got := scanSpans(t, rows); !slices.Equal(got, []string{"span-4999"}) {
		t.Errorf("duration_ms::UBIGINT = 4999: %v, want span-4999", got)
	}
}
