package sink

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Zstd compresses staged files. Encoders are single-threaded (the workers
// staging concurrently are the parallelism) and kept, each with the
// buffer it compressed into last: a new encoder's history and a new
// output buffer per batch were large allocations whose fresh pages the
// kernel faulted in on every batch (docs/BENCHMARKS.md, "buffer_reuse").
// The zero value is ready for use.
type Zstd struct {
	once sync.Once
	free chan *zstdEncoder
}

// zstdKept is how many encoders stay kept: as many as batches a worker of
// a concurrent stager stages at once (Databend's StageAhead). More are
// made when more stage at once, and dropped after.
const zstdKept = 4

type zstdEncoder struct {
	enc *zstd.Encoder
	dst []byte
}

// Compress compresses data at SpeedFastest (~4x on agent traces) and
// passes the result to use, which must not keep it: the buffer is reused
// once use returns.
func (z *Zstd) Compress(data []byte, use func(compressed []byte) error) error {
	z.once.Do(func() { z.free = make(chan *zstdEncoder, zstdKept) })
	var e *zstdEncoder
	select {
	case e = <-z.free:
	default:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("zstd encoder: %w", err)
		}
		e = &zstdEncoder{enc: enc}
	}
	e.dst = e.enc.EncodeAll(data, e.dst[:0])
	err := use(e.dst)
	select {
	case z.free <- e:
	default:
	}
	return err
}
