package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"math/rand/v2"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// otlp.max_body_bytes bounds a request after decompression (README): a
// request at the bound whose content does not compress (a span's bytes
// attribute, an image say) is a few hundred bytes larger gzipped. It was
// refused as past the bound by its compressed size, over OTLP/HTTP (413)
// and OTLP/gRPC (ResourceExhausted), neither retried by clients: its
// spans were lost. It is stored.
func TestCompressedRequestAtTheBodyBoundIsStored(t *testing.T) {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID([16]byte{1})
	span.SetSpanID([8]byte{1})
	random := make([]byte, 256<<10)
	_, _ = rand.NewChaCha8([32]byte{3}).Read(random)
	span.Attributes().PutEmptyBytes("payload").FromRaw(random)
	pb, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(pb)
	_ = w.Close()
	if gz.Len() <= len(pb) {
		t.Fatalf("gzip made the request %d bytes from %d: want it larger", gz.Len(), len(pb))
	}
	atTheBound := func(o *Options) { o.MaxBodyBytes = int64(len(pb)) }

	t.Run("http", func(t *testing.T) {
		fwd := &forwarded{}
		r := start(t, fwd, atTheBound)
		req, err := http.NewRequest(http.MethodPost, "http://"+r.Addr["http"]+"/v1/traces", bytes.NewReader(gz.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentProto)
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(fwd.stored()) != 1 {
			t.Errorf("a request of %d bytes, max_body_bytes %d, sent gzipped in %d bytes: %s, %d forwarded; want 200, once",
				len(pb), len(pb), gz.Len(), resp.Status, len(fwd.stored()))
		}
	})
	t.Run("grpc", func(t *testing.T) {
		fwd := &forwarded{}
		r := start(t, fwd, atTheBound)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t")
		_, err := ptraceotlp.NewGRPCClient(grpcConn(t, r)).Export(ctx, exportRequest(t, pb), grpc.UseCompressor("gzip"))
		if err != nil || len(fwd.stored()) != 1 {
			t.Errorf("a message of %d bytes, max_body_bytes %d, sent gzipped: %v, %d forwarded; want stored once",
				len(pb), len(pb), err, len(fwd.stored()))
		}
	})
}
