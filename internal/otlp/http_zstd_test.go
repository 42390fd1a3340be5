package otlp

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// An OTLP/HTTP request compressed with zstd as a streaming encoder writes
// it (the Collector's otlphttp exporter with compression: zstd copies the
// body into klauspost/compress's encoder, which names an 8 MiB window
// for a stream of unknown size) was refused 400, "window size exceeded",
// under an otlp.max_body_bytes below 8 MiB, however small the request:
// the HTTP receiver capped the window at the body bound, which the gRPC
// receiver does not (the larger of it and 8 MiB, zstd's usual window).
// Clients do not retry a 400: every such request was dropped. A frame
// naming a far larger window stays refused before its memory is taken.
func TestHTTPZstdStreamUnderTheBodyBoundIsStored(t *testing.T) {
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.MaxBodyBytes = 1 << 20 })
	body, _ := traceRequest(t, 5000)
	var compressed bytes.Buffer
	zw, err := zstd.NewWriter(&compressed, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(body); i += 4096 { // streamed, as io.Copy writes it
		if _, err := zw.Write(body[i:min(i+4096, len(body))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, out := post(t, r, "/v1/traces", contentProto, "zstd", compressed.Bytes(), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request of %d bytes (max_body_bytes %d), zstd-streamed: answered %d %q", len(body), 1<<20, resp.StatusCode, out)
	}
	if rows := rowsOf(t, fwd.stored()); len(rows) != 5000 {
		t.Errorf("%d spans forwarded, want 5000", len(rows))
	}

	// RFC 8878's header naming a 512 MiB window (no content size), then one
	// raw block.
	frame := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (29 - 10) << 3, byte(1 | 5<<3), 0, 0}, "hello"...)
	if resp, _ := post(t, r, "/v1/traces", contentProto, "zstd", frame, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a frame naming a 512 MiB window: answered %d, want 400", resp.StatusCode)
	}
}
