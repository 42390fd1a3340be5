package otlp

import (
	"bytes"
	"compress/zlib"
	"io"
	"net/http"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
)

// The OpenTelemetry Collector's OTLP/HTTP exporter (confighttp) offers
// gzip, zstd, zlib, deflate (zlib's format, as HTTP's deflate is), snappy
// (the block format; the framed one before v0.125, which its own receiver
// still tells apart by the framing header), x-snappy-framed and lz4 (the
// frame format), and its receiver takes them all. The receivers took
// gzip and zstd alone, and answered the others 415, which clients do not
// retry: a Collector or Alloy sending with compression: zlib, deflate,
// snappy or lz4 had every request dropped. Each arrives once; a snappy
// block whose header names more than max_body_bytes is refused 413
// before it is decoded.
func TestHTTPCollectorCompressions(t *testing.T) {
	body, _ := traceRequest(t, 3)
	compress := func(w io.WriteCloser, buf *bytes.Buffer) []byte {
		t.Helper()
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	with := func(f func(*bytes.Buffer) io.WriteCloser) []byte {
		var buf bytes.Buffer
		return compress(f(&buf), &buf)
	}
	zlibbed := with(func(b *bytes.Buffer) io.WriteCloser { return zlib.NewWriter(b) })
	framed := with(func(b *bytes.Buffer) io.WriteCloser { return snappy.NewBufferedWriter(b) })
	lz4ed := with(func(b *bytes.Buffer) io.WriteCloser { return lz4.NewWriter(b) })
	for _, c := range []struct {
		name, encoding string
		body           []byte
	}{
		{"zlib", "zlib", zlibbed},
		{"deflate", "deflate", zlibbed},
		{"snappy block", "snappy", snappy.Encode(nil, body)},
		{"snappy framed", "snappy", framed},
		{"x-snappy-framed", "x-snappy-framed", framed},
		{"lz4", "lz4", lz4ed},
	} {
		fwd := &forwarded{}
		r := start(t, fwd, nil)
		resp, out := post(t, r, "/v1/traces", contentProto, c.encoding, c.body, map[string]string{"X-Scope-OrgID": "team-a"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: answered %d %q, want 200", c.name, resp.StatusCode, out)
			continue
		}
		if rows := rowsOf(t, fwd.stored()); len(rows) != 3 {
			t.Errorf("%s: %d spans forwarded, want 3", c.name, len(rows))
		}
	}

	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.MaxBodyBytes = 1 << 10 })
	zeros := snappy.Encode(nil, make([]byte, 1<<20))
	if resp, _ := post(t, r, "/v1/traces", contentProto, "snappy", zeros, nil); resp.StatusCode != http.StatusRequestEntityTooLarge || len(fwd.stored()) != 0 {
		t.Errorf("a snappy block of 1 MiB under a 1 KiB max_body_bytes: answered %d, want 413", resp.StatusCode)
	}
}
