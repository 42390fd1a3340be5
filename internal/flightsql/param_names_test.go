package flightsql

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
)

// A prepared statement whose columns' types wait for its parameter's
// value says, when prepared (ADBC's ExecuteSchema, JDBC's metadata), the
// column names its stream then carries: DuckDB's own for the query, x
// and x, where the prepared schema said x and x_1.
func TestPreparedParameterTypedColumnsNamedAsStreamed(t *testing.T) {
	duck := duckLake(t)
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader = duck })
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	ctx := context.Background()
	st := statement(t, c, "SELECT ? AS x, duration_ms AS x FROM otel_spans WHERE duration_ms < 3")
	if err := st.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	said, err := st.(adbc.StatementExecuteSchema).ExecuteSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	params := int64Batch(7)
	defer params.Release()
	if err := st.Bind(ctx, params); err != nil {
		t.Fatal(err)
	}
	rdr, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var saidNames, streamed []string
	for _, f := range said.Fields() {
		saidNames = append(saidNames, f.Name)
	}
	for _, f := range rdr.Schema().Fields() {
		streamed = append(streamed, f.Name)
	}
	want := []string{"x", "x"}
	if !slices.Equal(saidNames, want) || !slices.Equal(streamed, want) {
		t.Errorf("prepared schema %q, streamed %q; want %q both", saidNames, streamed, want)
	}
	var rows int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil || rows != 3 {
		t.Errorf("%d rows (%v), want 3", rows, err)
	}
}
