package flightsql

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcfs "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// quiet is the servers' log in tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// setup starts a server over a new fakeReader with a plain client of
// it.
func setup(t *testing.T, opts ...func(*Options)) (*fakeReader, *Server, *afsql.Client) {
	t.Helper()
	r := &fakeReader{}
	s := start(t, r, opts...)
	return r, s, client(t, s.Addr)
}

// start runs a server over r, listening on a local TCP port, stopped
// when the test ends.
func start(t *testing.T, r *fakeReader, opts ...func(*Options)) *Server {
	t.Helper()
	o := Options{Listen: "127.0.0.1:0", Reader: r, Tenants: testTenants, Version: "1.2.3", Log: quiet}
	for _, f := range opts {
		f(&o)
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// adbcConn is an ADBC Flight SQL connection to uri for tenant with token
// ("" sends none), closed when the test ends.
func adbcConn(t *testing.T, uri, tenant, token string, extra map[string]string) adbc.Connection {
	t.Helper()
	c, err := adbcOpen(uri, tenant, token, extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func adbcOpen(uri, tenant, token string, extra map[string]string) (adbc.Connection, error) {
	opts := map[string]string{adbc.OptionKeyURI: uri}
	if tenant != "" {
		opts[adbcfs.OptionRPCCallHeaderPrefix+"x-scope-orgid"] = tenant
	}
	if token != "" {
		opts[adbcfs.OptionAuthorizationHeader] = "Bearer " + token
	}
	for k, v := range extra {
		opts[k] = v
	}
	db, err := adbcfs.NewDriver(memory.DefaultAllocator).NewDatabase(opts)
	if err != nil {
		return nil, err
	}
	c, err := db.Open(context.Background())
	if err != nil {
		db.Close()
		return nil, err
	}
	return &closeBoth{c, db}, nil
}

// closeBoth closes the database with its connection.
type closeBoth struct {
	adbc.Connection
	db adbc.Database
}

func (c *closeBoth) Close() error { return errors.Join(c.Connection.Close(), c.db.Close()) }

// spans is what a result holds: names in order, and how many batches
// brought them.
type spans struct {
	names   []string
	ns      []int64
	batches int
}

// readSpans reads a result of spansSchema to its end and releases it.
func readSpans(rdr array.RecordReader) (spans, error) {
	defer rdr.Release()
	var got spans
	for rdr.Next() {
		rec := rdr.RecordBatch()
		got.batches++
		names := rec.Column(0).(*array.String)
		ns := rec.Column(1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			got.names = append(got.names, names.Value(i))
			got.ns = append(got.ns, ns.Value(i))
		}
	}
	return got, rdr.Err()
}

// statement is a statement of sql on c, closed when the test ends.
func statement(t *testing.T, c adbc.Connection, sql string) adbc.Statement {
	t.Helper()
	st, err := c.NewStatement()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.SetSqlQuery(sql); err != nil {
		t.Fatal(err)
	}
	return st
}

// runQuery runs sql on c and reads its result.
func runQuery(t *testing.T, c adbc.Connection, sql string) spans {
	t.Helper()
	got, err := execute(t, c, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return got
}

func execute(t *testing.T, c adbc.Connection, sql string) (spans, error) {
	t.Helper()
	rdr, _, err := statement(t, c, sql).ExecuteQuery(context.Background())
	if err != nil {
		return spans{}, err
	}
	return readSpans(rdr)
}

// tryQuery connects to uri as adbcConn does and runs allSpans; the error
// is the connection's or the query's.
func tryQuery(t *testing.T, uri, tenant, token string, extra map[string]string) (spans, error) {
	t.Helper()
	c, err := adbcOpen(uri, tenant, token, extra)
	if err != nil {
		return spans{}, err
	}
	defer c.Close()
	return execute(t, c, allSpans)
}

// client is a plain arrow-go Flight SQL client of addr, for the calls
// ADBC does not make (or checks itself); calls carry md (see as).
func client(t *testing.T, addr string, opts ...grpc.DialOption) *afsql.Client {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	c, err := afsql.NewClient(addr, nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// as is a context whose calls name tenant and show token ("" sends
// none).
func as(tenant, token string) context.Context {
	var kv []string
	if tenant != "" {
		kv = append(kv, "x-scope-orgid", tenant)
	}
	if token != "" {
		kv = append(kv, "authorization", "Bearer "+token)
	}
	return metadata.AppendToOutgoingContext(context.Background(), kv...)
}

// fetch runs a FlightInfo's one endpoint with ctx and reads the result
// of spansSchema; the error is the call's.
func fetch(ctx context.Context, t *testing.T, c *afsql.Client, info *flight.FlightInfo) (spans, error) {
	t.Helper()
	if len(info.Endpoint) != 1 {
		t.Fatalf("%d endpoints, want 1", len(info.Endpoint))
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		return spans{}, err
	}
	defer rdr.Release()
	var got spans
	for rdr.Next() {
		rec := rdr.RecordBatch()
		got.batches++
		for i := range int(rec.NumRows()) {
			got.names = append(got.names, rec.Column(0).(*array.String).Value(i))
		}
	}
	return got, rdr.Err()
}

// open runs sql with ctx and opens its result.
func open(ctx context.Context, t *testing.T, c *afsql.Client, sql string) *flight.Reader {
	t.Helper()
	info, err := c.Execute(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// column reads rdr to its end and releases it: the values of column col
// as strings.
func column(t *testing.T, rdr array.RecordReader, col int) []string {
	t.Helper()
	defer rdr.Release()
	var got []string
	for rdr.Next() {
		a := rdr.RecordBatch().Column(col)
		for i := range a.Len() {
			got = append(got, a.ValueStr(i))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// fetchColumn fetches a FlightInfo's one endpoint with ctx: column col.
func fetchColumn(ctx context.Context, t *testing.T, c *afsql.Client, info *flight.FlightInfo, col int) []string {
	t.Helper()
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	return column(t, rdr, col)
}

// wantCode fails unless err is a gRPC status of code.
func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if grpcstatus.Code(err) != code {
		t.Errorf("%s: got %v, want code %v", what, err, code)
	}
}

// runBound binds one int64 parameter to the prepared st, a row per
// value, runs it and reads its result.
func runBound(t *testing.T, st adbc.Statement, vs ...int64) spans {
	t.Helper()
	ctx := context.Background()
	params := int64Batch(vs...)
	defer params.Release()
	if err := st.Bind(ctx, params); err != nil {
		t.Fatal(err)
	}
	rdr, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readSpans(rdr)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// int64Batch is a one-column batch of parameters, one row per value.
func int64Batch(vs ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.PrimitiveTypes.Int64}}, nil))
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(vs, nil)
	return b.NewRecordBatch()
}
