package flightsql

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// paramsStream is the parameters a handle carries for rows of an int64
// and a string, as bindParams keeps them.
func paramsStream(t *testing.T) []byte {
	t.Helper()
	s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(alloc, s)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"x", "yy", "zzz"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(s, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	p, err := bindParams(rdr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// withBodyLength is stream p with the body length its record batch
// message declares set to n. A message of the stream is 0xFFFFFFFF, the
// length of its metadata (a flatbuffer holding the body's length), the
// metadata, then the body.
func withBodyLength(t *testing.T, p []byte, n int64) []byte {
	t.Helper()
	mr := ipc.NewMessageReader(bytes.NewReader(p))
	defer mr.Release()
	at := 0
	for {
		msg, err := mr.Message()
		if err != nil {
			t.Fatal(err)
		}
		metaLen := int(binary.LittleEndian.Uint32(p[at+4:]))
		meta := p[at+8 : at+8+metaLen]
		if msg.Type() != ipc.MessageRecordBatch {
			at += 8 + metaLen + int(msg.BodyLen())
			continue
		}
		i := bytes.Index(meta, binary.LittleEndian.AppendUint64(nil, uint64(msg.BodyLen())))
		if i < 0 {
			t.Fatal("no body length in the record batch message")
		}
		out := bytes.Clone(p)
		binary.LittleEndian.PutUint64(out[at+8+i:], uint64(n))
		return out
	}
}

// TestForgedHandleParameters: a handle is not signed, so the parameters
// it carries are whatever a caller sends. Read as trusted, a body length
// of a petabyte made the IPC reader allocate it (the process died out of
// memory, its loads with it), and corrupt batches panicked in the gRPC
// handler (no recovery there: the process died too). Each is refused as
// not a handle of this server; so are more rows than maxParamRows.
func TestForgedHandleParameters(t *testing.T) {
	good := paramsStream(t)
	if rows, err := paramRows(good); err != nil || len(rows) != 3 {
		t.Fatalf("the parameters read back: %v, %v", rows, err)
	}
	for _, n := range []int64{1 << 50, 1 << 38, 1 << 33, int64(len(good)) * 64} {
		if _, err := paramRows(withBodyLength(t, good, n)); grpcstatus.Code(err) != codes.InvalidArgument {
			t.Errorf("a body of %d bytes declared: %v, want InvalidArgument", n, err)
		}
	}
	// Each row of parameters runs the query once, and the rows were all
	// made as Go values first: a megabyte of booleans is eight million.
	many := make([]int64, maxParamRows+1)
	batch := int64Batch(many...)
	defer batch.Release()
	rdr, err := array.NewRecordReader(batch.Schema(), []arrow.RecordBatch{batch})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := bindParams(rdr); grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("%d rows bound: %v, want InvalidArgument", len(many), err)
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(batch.Schema()))
	if err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := paramRows(buf.Bytes()); grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("a handle of %d rows: %v, want InvalidArgument", len(many), err)
	}
	// Bytes changed at random: read or refused, never a panic.
	r := rand.New(rand.NewSource(1))
	for range 20000 {
		m := bytes.Clone(good)
		for range 1 + r.Intn(4) {
			m[r.Intn(len(m))] = byte(r.Intn(256))
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("paramRows panicked on forged parameters: %v", p)
				}
			}()
			if _, err := paramRows(m); err != nil && grpcstatus.Code(err) != codes.InvalidArgument {
				t.Fatalf("forged parameters: %v, want InvalidArgument", err)
			}
		}()
	}
}

// listSchemaHeader is the metadata of a schema message whose one field is
// a list (so it has one child), with the length of that field's children
// set to n.
func listSchemaHeader(t *testing.T, n uint32) []byte {
	t.Helper()
	s := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	meta := bytes.Clone(b[8 : 8+binary.LittleEndian.Uint32(b[4:])])
	// Message → Schema (header) → fields[0] → children.
	fb := flatbuf(meta)
	root, err := fb.uoffset(0)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := fb.table(root)
	if err != nil {
		t.Fatal(err)
	}
	schema, _, err := fb.subtable(msg, 2)
	if err != nil {
		t.Fatal(err)
	}
	var field table
	if err := fb.tables(schema, 1, func(f table) error { field = f; return nil }); err != nil {
		t.Fatal(err)
	}
	start, count, err := fb.vector(field, 5, 4)
	if err != nil || count != 1 {
		t.Fatalf("the list's children: %d, %v", count, err)
	}
	binary.LittleEndian.PutUint32(meta[start-4:], n)
	return meta
}

// TestForgedDoPutSchema: the parameters a client binds arrive as Arrow
// IPC, which arrow-go reads trusting the lengths it declares: a schema
// message of a few hundred bytes declaring 2³¹ children made the server
// allocate hundreds of gigabytes for them, and the process died. The
// message is refused before arrow-go reads it.
func TestForgedDoPutSchema(t *testing.T) {
	_, _, c := setup(t)
	ctx := as("a", "tok-a")
	if _, err := checkIPCMessage(listSchemaHeader(t, 1)); err != nil {
		t.Fatalf("a schema with a list refused: %v", err)
	}
	forged := listSchemaHeader(t, 1<<31-1)
	if _, err := checkIPCMessage(forged); err == nil {
		t.Fatal("a schema declaring 2³¹ children passed")
	}
	stream, err := c.Client.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := &pb.CommandPreparedStatementQuery{PreparedStatementHandle: handle{scope: tenancy.One("a"), sql: spansFrom}.encode()}
	if err := stream.Send(&flight.FlightData{FlightDescriptor: descriptor(t, cmd), DataHeader: forged}); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantCode(t, "a forged schema", err, codes.InvalidArgument)
}
