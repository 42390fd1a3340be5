package otlp

import (
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/encoding"
)

// The OpenTelemetry Collector's OTLP/gRPC exporter offers gzip, snappy and
// zstd (configgrpc's `compression`); gRPC-Go itself registers none of them
// but gzip, and a request of an encoding no compressor is registered for
// is refused (Unimplemented) at every retry: the exporter's data never
// arrives. So the receivers take all three. gRPC bounds what a
// decompressor may produce (it reads MaxRecvMsgSize + 1 bytes at most and
// answers ResourceExhausted past it); what it cannot bound is the memory a
// zstd decoder takes before producing anything: a frame names its window,
// up to 3.75 TB, and the decoder keeps that much history. zstdWindow caps
// it (below).
func init() {
	encoding.RegisterCompressor(zstdCompressor{})
	encoding.RegisterCompressor(snappyCompressor{})
}

// minZstdWindow is the least window a zstd frame may name: that of
// zstd's own levels up to 19 and of the Collector's encoder
// (klauspost/compress, 8 MiB by default) for streams of unknown size. A
// frame of known size names its size (single segment), so the request's
// own bound covers it.
const minZstdWindow = 8 << 20

var zstdWindow struct {
	sync.Mutex
	max uint64
}

// zstdWindowFor is the largest zstd window taken for requests of at most
// maxBody bytes: the larger of their size and zstd's usual window, both
// receivers alike (the HTTP receiver's cap at maxBody refused every
// streamed request below an 8 MiB max_body_bytes).
func zstdWindowFor(maxBody int64) uint64 { return max(uint64(maxBody)+1, minZstdWindow) }

// allowZstdWindow raises the zstd window the gRPC receivers accept to a
// request's largest size: compressors are registered for the process,
// not per server, so the largest of the receivers started wins.
func allowZstdWindow(maxBody int64) {
	zstdWindow.Lock()
	defer zstdWindow.Unlock()
	zstdWindow.max = max(zstdWindow.max, zstdWindowFor(maxBody))
}

func zstdWindowMax() uint64 {
	zstdWindow.Lock()
	defer zstdWindow.Unlock()
	return max(zstdWindow.max, minZstdWindow)
}

type zstdCompressor struct{}

func (zstdCompressor) Name() string { return "zstd" }

// Compress compresses answers (gRPC answers in the request's encoding)
// and requests of clients in this process, with an encoder kept for the
// next message once one is closed.
func (zstdCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	e, _ := zstdEncoders.Get().(*zstd.Encoder)
	if e == nil {
		var err error
		if e, err = zstd.NewWriter(w, zstd.WithEncoderConcurrency(1)); err != nil {
			return nil, err
		}
	} else {
		e.Reset(w)
	}
	return &pooledEncoder{e}, nil
}

var zstdEncoders sync.Pool

type pooledEncoder struct{ *zstd.Encoder }

func (p *pooledEncoder) Close() error {
	err := p.Encoder.Close()
	zstdEncoders.Put(p.Encoder)
	return err
}

// Decompress decodes synchronously (concurrency 1: no goroutine of the
// decoder outlives a message that gRPC stops reading at its size limit)
// and refuses a frame whose window is larger than allowed before taking
// its memory.
func (zstdCompressor) Decompress(r io.Reader) (io.Reader, error) {
	d, err := newZstdReader(r, zstdWindowMax())
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// newZstdReader decodes r synchronously (concurrency 1: no goroutine of
// the decoder outlives a request read no further) and refuses a frame
// whose window is larger than window before taking its memory. What it
// decodes is bounded by its caller.
func newZstdReader(r io.Reader, window uint64) (*zstd.Decoder, error) {
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(window),
		zstd.WithDecoderLowmem(true))
}

// snappyCompressor is snappy's framed format, as the Collector's snappy
// compressor for gRPC writes it; its chunks are 64 KiB at most, so a
// decoder's memory is bounded by the format.
type snappyCompressor struct{}

func (snappyCompressor) Name() string { return "snappy" }

func (snappyCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	return snappy.NewBufferedWriter(w), nil
}

func (snappyCompressor) Decompress(r io.Reader) (io.Reader, error) {
	return snappy.NewReader(r), nil
}
