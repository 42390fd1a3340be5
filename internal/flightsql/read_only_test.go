package flightsql

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Every write, ingestion and transaction call is refused PermissionDenied,
// and none reaches the Reader.
func TestWritesAndTransactionsAreRefused(t *testing.T) {
	r, _, c := setup(t)
	ctx := as("a", "tok-a")

	_, err := c.ExecuteUpdate(ctx, "DELETE FROM spans")
	wantCode(t, "update", err, codes.PermissionDenied)
	_, err = c.ExecuteSubstraitUpdate(ctx, afsql.SubstraitPlan{Plan: []byte{1}, Version: "0.1"})
	wantCode(t, "Substrait plan update", err, codes.PermissionDenied)

	rows := int64Batch(1, 2)
	defer rows.Release()
	ingest, err := array.NewRecordReader(rows.Schema(), []arrow.RecordBatch{rows})
	if err != nil {
		t.Fatal(err)
	}
	defer ingest.Release()
	_, err = c.ExecuteIngest(ctx, ingest, &afsql.ExecuteIngestOpts{Table: "spans",
		TableDefinitionOptions: &afsql.TableDefinitionOptions{IfNotExist: afsql.TableDefinitionOptionsTableNotExistOptionFail}})
	wantCode(t, "ingest", err, codes.PermissionDenied)

	prep, err := c.Prepare(ctx, allSpans)
	if err != nil {
		t.Fatal(err)
	}
	_, err = prep.ExecuteUpdate(ctx)
	wantCode(t, "prepared update", err, codes.PermissionDenied)

	_, err = c.BeginTransaction(ctx)
	wantCode(t, "begin transaction", err, codes.PermissionDenied)
	for _, a := range []struct {
		typ string
		msg proto.Message
	}{
		{afsql.EndTransactionActionType, &pb.ActionEndTransactionRequest{TransactionId: []byte("t"), Action: pb.ActionEndTransactionRequest_END_TRANSACTION_COMMIT}},
		{afsql.BeginSavepointActionType, &pb.ActionBeginSavepointRequest{TransactionId: []byte("t"), Name: "s"}},
		{afsql.EndSavepointActionType, &pb.ActionEndSavepointRequest{SavepointId: []byte("s"), Action: pb.ActionEndSavepointRequest_END_SAVEPOINT_RELEASE}},
	} {
		wantCode(t, a.typ, doAction(ctx, t, c, a.typ, a.msg), codes.PermissionDenied)
	}
	// A query in a transaction the server never began is refused alike.
	_, err = c.Client.GetFlightInfo(ctx, descriptor(t, &pb.CommandStatementQuery{Query: allSpans, TransactionId: []byte("t")}))
	wantCode(t, "query in a transaction", err, codes.PermissionDenied)

	if n := len(r.queries()); n != 0 {
		t.Errorf("%d calls reached the Reader", n)
	}
}

// Through ADBC: an update and a bulk ingestion are refused, as ADBC's
// StatusUnauthorized.
func TestWritesAreRefusedThroughADBC(t *testing.T) {
	_, s, _ := setup(t)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	ctx := context.Background()
	unauthorized := func(what string, err error) {
		t.Helper()
		var ae adbc.Error
		if !errors.As(err, &ae) || ae.Code != adbc.StatusUnauthorized {
			t.Errorf("%s: %v, want StatusUnauthorized", what, err)
		}
	}
	_, err := statement(t, c, "DELETE FROM spans").ExecuteUpdate(ctx)
	unauthorized("update", err)

	st, err := c.NewStatement()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetOption(adbc.OptionKeyIngestTargetTable, "spans"); err != nil {
		t.Fatal(err)
	}
	rows := int64Batch(1)
	defer rows.Release()
	if err := st.Bind(ctx, rows); err != nil {
		t.Fatal(err)
	}
	_, err = st.ExecuteUpdate(ctx)
	unauthorized("ingest", err)
}

// doAction makes a Flight action of typ with msg and returns its error.
func doAction(ctx context.Context, t *testing.T, c *afsql.Client, typ string, msg proto.Message) error {
	t.Helper()
	stream, err := c.Client.DoAction(ctx, &flight.Action{Type: typ, Body: packed(t, msg)})
	if err != nil {
		return err
	}
	_, err = stream.Recv()
	return err
}

// descriptor is the Flight descriptor of a Flight SQL command.
func descriptor(t *testing.T, cmd proto.Message) *flight.FlightDescriptor {
	t.Helper()
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: packed(t, cmd)}
}

// packed is msg in an Any, as Flight SQL sends its messages.
func packed(t *testing.T, msg proto.Message) []byte {
	t.Helper()
	a, err := anypb.New(msg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
