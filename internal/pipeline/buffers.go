package pipeline

// buffers recycles the byte buffers of staged batches (their rows) for the
// batches that follow, when the sink keeps none of them (a
// sink.RowsReleaser). Without it every batch allocates its rows anew, and
// grows them from the size of the batch before, which under backpressure
// is often a small one closed early: twice the bytes written were
// allocated, and the collector's work and the heap's peaks with them. A
// nil *buffers allocates. Safe for concurrent use: the batcher takes, the
// stager gives back.
type buffers struct{ free chan []byte }

// buffersKept is how many free buffers a worker keeps: one batch is open
// while the one before it is being staged, and the buffer staged before
// that waits here for the next batch.
const buffersKept = 1

func newBuffers() *buffers { return &buffers{free: make(chan []byte, buffersKept)} }

// get returns an empty buffer with room for at least size bytes: a free
// one if it is large enough (a smaller one is dropped), else a new one
// with an eighth more, so that a batch a little larger than the last does
// not grow (and copy) it.
func (p *buffers) get(size int) []byte {
	if p != nil {
		select {
		case b := <-p.free:
			if cap(b) >= size {
				return b[:0]
			}
		default:
		}
	}
	return make([]byte, 0, size+size/8)
}

// put gives b back once nothing refers to it any more; it is dropped when
// enough are kept already.
func (p *buffers) put(b []byte) {
	if p == nil || cap(b) == 0 {
		return
	}
	select {
	case p.free <- b[:0]:
	default:
	}
}
