package otlp

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// The OpenTelemetry Collector's OTLP/gRPC exporter sends with each
// compression it offers (gzip, snappy, zstd: pdata's gRPC client with
// gRPC's UseCompressor, as the exporter calls it); each request arrives
// once with its tenant. Without a registered decompressor gRPC refuses
// the request (Unimplemented) at every retry.
func TestGRPCCompressions(t *testing.T) {
	body, _ := traceRequest(t, 3)
	for _, name := range []string{"gzip", "snappy", "zstd"} {
		t.Run(name, func(t *testing.T) {
			fwd := &forwarded{}
			r := start(t, fwd, nil)
			conn, err := grpc.NewClient(r.Addr["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(body); err != nil {
				t.Fatal(err)
			}
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "team-a")
			if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, req, grpc.UseCompressor(name)); err != nil {
				t.Fatalf("export with %s: %v", name, err)
			}
			rows := rowsOf(t, fwd.stored())
			if len(rows) != 3 {
				t.Fatalf("%d spans forwarded, want 3", len(rows))
			}
			for _, row := range rows {
				if !strings.Contains(row, `"tenant_id":"team-a"`) {
					t.Fatalf("row of another tenant: %s", row)
				}
			}
		})
	}
}

// A zstd frame names the window its decoder keeps, up to terabytes; the
// receivers decode one that names at most the larger of a request's bound
// and zstd's usual 8 MiB, and refuse a larger one before taking its
// memory (the decoder's own default would take 512 MiB per request).
// Encoders name a smaller window when they know the size, so the frames
// are made by hand: RFC 8878's header (no content size, no checksum),
// then one raw block.
func TestZstdWindowBounded(t *testing.T) {
	allowZstdWindow(1 << 20)
	frame := func(windowLog byte) []byte {
		const text = "hello"
		b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (windowLog - 10) << 3}
		b = append(b, byte(1|len(text)<<3), 0, 0) // the last block, raw, of len(text) bytes
		return append(b, text...)
	}
	decode := func(b []byte) ([]byte, error) {
		r, err := zstdCompressor{}.Decompress(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}
	if got, err := decode(frame(23)); err != nil || string(got) != "hello" {
		t.Fatalf("a frame of an 8 MiB window: %q, %v", got, err)
	}
	if _, err := decode(frame(29)); err == nil {
		t.Fatal("a frame naming a 512 MiB window was decoded")
	}
}
