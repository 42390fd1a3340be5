package flightsql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// Arrow IPC a caller sends (the parameters it binds with DoPut, and the
// parameters a handle carries, which is not signed) is checked before
// arrow-go reads it. arrow-go trusts a message's metadata: it sizes Go
// slices by the lengths the flatbuffer declares (a field's children, a
// schema's fields, custom metadata, variadic buffer counts) and buffers
// by the body and uncompressed lengths, so a few forged bytes declaring
// billions of children made it allocate hundreds of gigabytes, and the
// process died out of memory, its loads with it (a Go program cannot
// recover from that). checkIPCMessage verifies what arrow-go sizes
// anything by; the rest of a forged message fails arrow-go's own reads,
// or panics them, which the readers here recover from.

// maxFieldDepth bounds the nesting of a schema's fields.
const maxFieldDepth = 64

// The flatbuffer Type of binary and string views (Arrow's Schema.fbs).
const typeBinaryView, typeUtf8View = 23, 24

var errIPC = errors.New("not an Arrow IPC message this server reads")

// checkIPCMessage checks the metadata of one IPC message (a flatbuffer
// Message) and returns the length of the body it declares. Schemas
// without views, record batches and dictionary batches are taken,
// uncompressed.
func checkIPCMessage(meta []byte) (bodyLen int64, err error) {
	fb := flatbuf(meta)
	root, err := fb.uoffset(0)
	if err != nil {
		return 0, err
	}
	msg, err := fb.table(root)
	if err != nil {
		return 0, err
	}
	if err := fb.keyValues(msg, 4); err != nil {
		return 0, err
	}
	if p, ok := msg.field(3); ok {
		v, err := fb.uint(p, 8)
		if err != nil || int64(v) < 0 {
			return 0, errIPC
		}
		bodyLen = int64(v)
	}
	var headerType uint64
	if p, ok := msg.field(1); ok {
		if headerType, err = fb.uint(p, 1); err != nil {
			return 0, err
		}
	}
	header, ok, err := fb.subtable(msg, 2)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: no header", errIPC)
	}
	switch headerType {
	case 1: // Schema
		err = fb.schema(header)
	case 2: // DictionaryBatch
		var data table
		if data, ok, err = fb.subtable(header, 1); err == nil && ok {
			err = fb.recordBatch(data)
		}
	case 3: // RecordBatch
		err = fb.recordBatch(header)
	default:
		err = fmt.Errorf("%w: a message of type %d", errIPC, headerType)
	}
	return bodyLen, err
}

// checkIPCStream checks every message of an IPC stream (the framing of
// arrow-go's ipc.Writer: an optional 0xFFFFFFFF, the metadata's length,
// the metadata, the body), each body within the stream.
func checkIPCStream(b []byte) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return errIPC
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if n == 0xFFFFFFFF {
			if len(b) < 4 {
				return errIPC
			}
			n, b = binary.LittleEndian.Uint32(b), b[4:]
		}
		if n == 0 {
			return nil // end of stream
		}
		if uint64(n) > uint64(len(b)) {
			return errIPC
		}
		bodyLen, err := checkIPCMessage(b[:n])
		if err != nil {
			return err
		}
		b = b[n:]
		if bodyLen > int64(len(b)) {
			return errIPC
		}
		b = b[bodyLen:]
	}
	return nil
}

// flatbuf reads a flatbuffer, every position checked.
type flatbuf []byte

// table is a flatbuffer table: where it is, and its vtable.
type table struct {
	pos, vt, vtSize, size int
	fb                    flatbuf
}

func (fb flatbuf) uint(p, size int) (uint64, error) {
	if p < 0 || p > len(fb)-size {
		return 0, errIPC
	}
	var v uint64
	for i := size - 1; i >= 0; i-- {
		v = v<<8 | uint64(fb[p+i])
	}
	return v, nil
}

// uoffset is the position the offset at p points to.
func (fb flatbuf) uoffset(p int) (int, error) {
	v, err := fb.uint(p, 4)
	if err != nil || v > uint64(len(fb)-p) {
		return 0, errIPC
	}
	return p + int(v), nil
}

func (fb flatbuf) table(p int) (table, error) {
	soff, err := fb.uint(p, 4)
	if err != nil {
		return table{}, err
	}
	vt := p - int(int32(uint32(soff)))
	vtSize, err := fb.uint(vt, 2)
	if err != nil {
		return table{}, err
	}
	size, err := fb.uint(vt+2, 2)
	if err != nil || vtSize < 4 || vt+int(vtSize) > len(fb) || p+int(size) > len(fb) {
		return table{}, errIPC
	}
	return table{pos: p, vt: vt, vtSize: int(vtSize), size: int(size), fb: fb}, nil
}

// field is the position of the table's field in slot i, if present.
func (t table) field(i int) (int, bool) {
	o := 4 + 2*i
	if o+2 > t.vtSize {
		return 0, false
	}
	off := int(binary.LittleEndian.Uint16(t.fb[t.vt+o:]))
	if off == 0 {
		return 0, false
	}
	return t.pos + off, true
}

func (fb flatbuf) subtable(t table, i int) (table, bool, error) {
	p, ok := t.field(i)
	if !ok {
		return table{}, false, nil
	}
	target, err := fb.uoffset(p)
	if err != nil {
		return table{}, false, err
	}
	sub, err := fb.table(target)
	return sub, err == nil, err
}

// vector is the position of the first element and the length of the
// vector in slot i (0 when absent), all its elements of size within
// the buffer.
func (fb flatbuf) vector(t table, i, size int) (int, int, error) {
	p, ok := t.field(i)
	if !ok {
		return 0, 0, nil
	}
	v, err := fb.uoffset(p)
	if err != nil {
		return 0, 0, err
	}
	n, err := fb.uint(v, 4)
	if err != nil || n*uint64(size) > uint64(len(fb)-v-4) {
		return 0, 0, errIPC
	}
	return v + 4, int(n), nil
}

// tables calls f with each table of the vector of tables in slot i.
func (fb flatbuf) tables(t table, i int, f func(table) error) error {
	start, n, err := fb.vector(t, i, 4)
	if err != nil {
		return err
	}
	for j := range n {
		p, err := fb.uoffset(start + 4*j)
		if err != nil {
			return err
		}
		sub, err := fb.table(p)
		if err != nil {
			return err
		}
		if err := f(sub); err != nil {
			return err
		}
	}
	return nil
}

// keyValues checks the custom metadata in slot i.
func (fb flatbuf) keyValues(t table, i int) error {
	return fb.tables(t, i, func(kv table) error {
		for s := range 2 {
			if _, _, err := fb.vector(kv, s, 1); err != nil {
				return err
			}
		}
		return nil
	})
}

func (fb flatbuf) schema(s table) error {
	if err := fb.keyValues(s, 2); err != nil {
		return err
	}
	if _, _, err := fb.vector(s, 3, 8); err != nil { // features
		return err
	}
	return fb.tables(s, 1, func(f table) error { return fb.field(f, 1) })
}

// field checks a schema's field and its children.
func (fb flatbuf) field(f table, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("%w: fields nested deeper than %d", errIPC, maxFieldDepth)
	}
	if _, _, err := fb.vector(f, 0, 1); err != nil { // name
		return err
	}
	if p, ok := f.field(2); ok {
		// Binary and string views: arrow-go reads how many data buffers
		// each has from the batch by the order of the schema's views,
		// past the batch's own list when the schema has more views than
		// it (any number, sizing a slice).
		typ, err := fb.uint(p, 1)
		if err != nil {
			return err
		}
		if typ == typeBinaryView || typ == typeUtf8View {
			return fmt.Errorf("%w: binary and string views are not taken", errIPC)
		}
	}
	if _, _, err := fb.subtable(f, 3); err != nil { // type
		return err
	}
	if dict, ok, err := fb.subtable(f, 4); err != nil {
		return err
	} else if ok {
		if _, _, err := fb.subtable(dict, 1); err != nil { // index type
			return err
		}
	}
	if err := fb.keyValues(f, 6); err != nil {
		return err
	}
	return fb.tables(f, 5, func(c table) error { return fb.field(c, depth+1) })
}

func (fb flatbuf) recordBatch(rb table) error {
	if _, ok := rb.field(3); ok {
		return fmt.Errorf("%w: compressed batches are not taken", errIPC)
	}
	if _, _, err := fb.vector(rb, 1, 16); err != nil { // nodes
		return err
	}
	_, buffers, err := fb.vector(rb, 2, 16)
	if err != nil {
		return err
	}
	start, n, err := fb.vector(rb, 4, 8) // variadic buffer counts
	if err != nil {
		return err
	}
	for j := range n {
		// Each variadic buffer is one of the batch's buffers.
		if c, _ := fb.uint(start+8*j, 8); c > uint64(buffers) {
			return fmt.Errorf("%w: more variadic buffers than buffers", errIPC)
		}
	}
	return nil
}

// checkDoPut is a stream interceptor that checks the IPC messages of a
// DoPut before arrow-go reads them: a message that does not pass ends
// the call with InvalidArgument.
func checkDoPut(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	if !strings.HasSuffix(info.FullMethod, "/DoPut") {
		return next(srv, ss)
	}
	return next(srv, &checkedStream{ss})
}

type checkedStream struct{ grpc.ServerStream }

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	fd, ok := m.(*flight.FlightData)
	if !ok || len(fd.DataHeader) == 0 {
		return nil
	}
	bodyLen, err := checkIPCMessage(fd.DataHeader)
	if err == nil && bodyLen > int64(len(fd.DataBody)) {
		err = fmt.Errorf("%w: a body shorter than it declares", errIPC)
	}
	if err != nil {
		return grpcstatus.Errorf(codes.InvalidArgument, "the data sent: %v", err)
	}
	return nil
}
