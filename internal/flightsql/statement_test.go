package flightsql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A plain statement through ADBC reads every batch, in the Reader's
// batches, and the query ran for the tenant the call named.
func TestStatementReadsEveryBatch(t *testing.T) {
	r := &fakeReader{}
	s := start(t, r)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)

	got := runQuery(t, c, allSpans)
	if len(got.names) != spanRows || got.names[0] != "a-0" || got.names[spanRows-1] != "a-9" {
		t.Errorf("rows %v, want a-0…a-9", got.names)
	}
	if want := (spanRows + batchRows - 1) / batchRows; got.batches != want {
		t.Errorf("%d batches, want %d: the Reader's batches are streamed as they are", got.batches, want)
	}
	calls := r.queries()
	if len(calls) != 1 || calls[0].scope != tenancy.One("a") || calls[0].sql != allSpans || len(calls[0].params) != 0 {
		t.Errorf("Reader calls %+v, want one of %q for tenant a", calls, allSpans)
	}
	r.released(t)
}

// A prepared statement with a bound parameter: the value reaches the
// Reader as a Go int64, the parameter schema comes from the Reader, and
// two bound rows run the query twice, one result after the other.
func TestPreparedStatementWithParameter(t *testing.T) {
	r := &fakeReader{}
	s := start(t, r)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	ctx := context.Background()

	st := statement(t, c, spansFrom)
	if err := st.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := st.GetParameterSchema()
	if err != nil {
		t.Fatal(err)
	}
	if ps.NumFields() != 1 || ps.Field(0).Type.ID() != arrow.INT64 {
		t.Errorf("parameter schema %v, want one int64", ps)
	}

	if got := runBound(t, st, 7); !slices.Equal(got.names, []string{"a-7", "a-8", "a-9"}) {
		t.Errorf("n >= 7: %v", got.names)
	}
	// Bound again: the new value, not the first one.
	if got := runBound(t, st, 9); !slices.Equal(got.names, []string{"a-9"}) {
		t.Errorf("n >= 9 after n >= 7: %v", got.names)
	}
	if got := runBound(t, st, 8, 9); !slices.Equal(got.names, []string{"a-8", "a-9", "a-9"}) {
		t.Errorf("rows 8 and 9 bound: %v, want n >= 8 then n >= 9", got.names)
	}
	var params [][]any
	for _, c := range r.queries() {
		if c.scope != tenancy.One("a") || c.sql != spansFrom {
			t.Errorf("Reader call %+v, want %q for tenant a", c, spansFrom)
		}
		params = append(params, c.params)
	}
	want := [][]any{{int64(7)}, {int64(9)}, {int64(8)}, {int64(9)}}
	if !slices.EqualFunc(params, want, func(a, b []any) bool { return slices.Equal(a, b) }) {
		t.Errorf("parameters %v, want %v", params, want)
	}
	r.released(t)
}

// A prepared statement the Reader refuses is refused when prepared, as
// the caller's error (InvalidArgument), and nothing runs.
func TestPrepareRefusedByTheReader(t *testing.T) {
	r, _, c := setup(t)
	_, err := c.Prepare(as("a", "tok-a"), deleteSpans)
	wantCode(t, "prepare "+deleteSpans, err, codes.InvalidArgument)
	if n := len(r.queries()); n != 0 {
		t.Errorf("%d queries ran", n)
	}
}

// A client that stops reading: the query's reader is released, and it
// was not read ahead to its end (the endless query would never end).
func TestCancelledReadReleasesTheReader(t *testing.T) {
	r, _, c := setup(t)
	ctx, cancel := context.WithCancel(as("a", "tok-a"))
	defer cancel()
	rdr := open(ctx, t, c, endlessSpans)
	for range 2 {
		if !rdr.Next() {
			t.Fatalf("the stream ended: %v", rdr.Err())
		}
	}
	cancel()
	rdr.Release()
	r.released(t)
	// gRPC's flow control lets the server run ahead of the client by a
	// window; bounded all the same.
	t.Logf("%d batches made", r.batches.Load())
	if n := r.batches.Load(); n > 10_000 {
		t.Errorf("%d batches made for a client that read 2", n)
	}
}

// A batch of the Reader's larger than gRPC clients take (4 MiB by
// default) goes out in slices of its rows: a client with the default
// limit reads it whole.
func TestLargeBatchIsSliced(t *testing.T) {
	r, _, c := setup(t)
	ctx := as("a", "tok-a")
	info, err := c.Execute(ctx, wideSpans)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch(ctx, t, c, info)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.names) != wideRows || got.names[wideRows-1] != fmt.Sprintf("%0*d", wideName, wideRows-1) {
		t.Errorf("%d rows, want %d in order", len(got.names), wideRows)
	}
	if got.batches < 4 {
		t.Errorf("%d batches for ~10 MiB, want slices of at most %d bytes", got.batches, maxBatchBytes)
	}
	r.released(t)
}

// A query failing mid-stream: the client gets Internal without the
// engine's file path, after the batches before it; the reader is released.
func TestFailureMidStream(t *testing.T) {
	r, _, c := setup(t)
	ctx := as("a", "tok-a")
	info, err := c.Execute(ctx, brokenSpans)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch(ctx, t, c, info)
	wantCode(t, "broken query", err, codes.Internal)
	if err != nil && (strings.Contains(err.Error(), "/var/lib") || !strings.Contains(err.Error(), "could not read")) {
		t.Errorf("message %q: want the engine's message without its file path", err)
	}
	if got.batches != 1 {
		t.Errorf("%d batches before the failure, want 1", got.batches)
	}
	r.released(t)
}

// Errors map to the caller's codes: a refusal of the Reader to
// InvalidArgument, other errors to Internal without file paths.
func TestReaderErrorsMapToCodes(t *testing.T) {
	r, _, c := setup(t)
	ctx := as("a", "tok-a")

	info, err := c.Execute(ctx, deleteSpans)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fetch(ctx, t, c, info)
	wantCode(t, deleteSpans, err, codes.InvalidArgument)
	if err != nil && !strings.Contains(err.Error(), "only a single SELECT") {
		t.Errorf("refusal %q lost the Reader's reason", err)
	}

	info, err = c.Execute(ctx, "SELECT * FROM nope")
	if err != nil {
		t.Fatal(err)
	}
	_, err = fetch(ctx, t, c, info)
	wantCode(t, "unknown table", err, codes.Internal)
	if err != nil && strings.Contains(err.Error(), "/var/lib") {
		t.Errorf("message %q names a server file", err)
	}
	r.released(t)
}

// GetSchema of a statement is the Reader's, without running it.
func TestStatementSchema(t *testing.T) {
	r, _, c := setup(t)
	res, err := c.GetExecuteSchema(as("a", "tok-a"), allSpans)
	if err != nil {
		t.Fatal(err)
	}
	got, err := flight.DeserializeSchema(res.GetSchema(), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(spansSchema) {
		t.Errorf("schema %v, want %v", got, spansSchema)
	}
	if n := len(r.queries()); n != 0 {
		t.Errorf("%d queries ran for a schema", n)
	}
}

// Shutdown with a stream still being read: past its deadline the call is
// cancelled and its reader released; Shutdown is then safe again, and on
// a nil Server.
func TestShutdownCancelsStreams(t *testing.T) {
	r := &fakeReader{}
	s, err := Start(Options{Listen: "127.0.0.1:0", Reader: r, Tenants: testTenants, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s.Addr)
	ctx := as("a", "tok-a")
	rdr := open(ctx, t, c, endlessSpans)
	defer rdr.Release()
	if !rdr.Next() {
		t.Fatal(rdr.Err())
	}
	sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(sctx); err == nil {
		t.Error("Shutdown returned nil with a stream that never ends")
	}
	r.released(t)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	var none *Server
	if err := none.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of nil: %v", err)
	}
}
