package otlp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
)

// bodyDecoders are the Content-Encodings the OTLP/HTTP receiver takes, by
// name (lower case): each the Collector's OTLP/HTTP exporter sends
// (confighttp's compressions: gzip, zstd, zlib, deflate, snappy,
// x-snappy-framed, lz4), as its own receiver takes them. A client whose
// encoding is refused gets 415, which it does not retry: a Collector
// configured with another compression than gzip or zstd had every
// request dropped. Each decoder reads raw (bounded by the receiver) and
// returns the body's reader, read within MaxBodyBytes; what it returns
// is closed after, if it is an io.Closer. limit is MaxBodyBytes, for the
// decoders that must know it before reading (errBodyTooLarge past it).
var bodyDecoders = map[string]func(raw io.Reader, limit int64) (io.Reader, error){
	"":         identity,
	"identity": identity,
	"gzip":     func(raw io.Reader, _ int64) (io.Reader, error) { return gzip.NewReader(raw) },
	"zstd": func(raw io.Reader, limit int64) (io.Reader, error) {
		d, err := newZstdReader(raw, zstdWindowFor(limit))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	},
	// HTTP's deflate is zlib's format (RFC 9110 8.4.1.2), as confighttp
	// writes and reads it.
	"zlib":    zlibBody,
	"deflate": zlibBody,
	"snappy":  snappyBody,
	// snappy's framed format: chunks of 64 KiB at most, so the decoder's
	// memory is bounded by the format.
	"x-snappy-framed": func(raw io.Reader, _ int64) (io.Reader, error) { return snappy.NewReader(raw), nil },
	// lz4's frame format; a block is 4 MiB at most.
	"lz4": func(raw io.Reader, _ int64) (io.Reader, error) { return lz4.NewReader(raw), nil },
}

// bodyEncodings lists bodyDecoders' names for the 415's message.
const bodyEncodings = "gzip, zstd, zlib, deflate, snappy, x-snappy-framed, lz4 or none"

// errBodyTooLarge is a body known to decode past MaxBodyBytes before it
// is decoded (413).
var errBodyTooLarge = errors.New("the body decodes past otlp.max_body_bytes")

func identity(raw io.Reader, _ int64) (io.Reader, error) { return raw, nil }

func zlibBody(raw io.Reader, _ int64) (io.Reader, error) { return zlib.NewReader(raw) }

// snappyFraming begins every stream of snappy's framed format (its stream
// identifier chunk).
var snappyFraming = []byte("\xff\x06\x00\x00sNaPpY")

// snappyBody reads Content-Encoding snappy: the block format, which
// confighttp writes since the Collector's v0.125, or the framed format it
// wrote before under that name (its receiver tells them apart by the
// framing's first chunk too). A block says its decoded length first: past
// limit, it is refused before its memory is taken.
func snappyBody(raw io.Reader, limit int64) (io.Reader, error) {
	br := bufio.NewReader(raw)
	if head, _ := br.Peek(len(snappyFraming)); bytes.Equal(head, snappyFraming) {
		return snappy.NewReader(br), nil
	}
	block, err := io.ReadAll(br)
	if err != nil {
		return nil, err
	}
	n, err := snappy.DecodedLen(block)
	switch {
	case err != nil:
		return nil, fmt.Errorf("snappy block: %w", err)
	case int64(n) > limit:
		return nil, errBodyTooLarge
	}
	decoded, err := snappy.Decode(nil, block)
	if err != nil {
		return nil, fmt.Errorf("snappy block: %w", err)
	}
	return bytes.NewReader(decoded), nil
}
