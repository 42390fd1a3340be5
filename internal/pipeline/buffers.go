package pipeline

// buffers recycles the byte buffers of batches (their rows) for the
// batches that follow, once the sink is done with them: when Stage
// returns for a sink.RowsReleaser (DuckDB writes them to files), when
// their load ends for the others (Databend keeps them until then, to leave
// rows out of a load). Without it every batch allocates its rows anew, and
// grows them from the size of the batch before, which under backpressure
// is often a small one closed early: twice the bytes written were
// allocated, and the collector's work and the heap's peaks with them; and
// the kernel faults in the fresh pages of each new buffer as rows are
// copied in (issue 40's perf profile: a quarter of a run's samples in the
// page-fault path; docs/BENCHMARKS.md, "outside_cpu" and "buffer_reuse").
// A nil *buffers allocates.
// Safe for concurrent use: the batcher takes, the stager or loader gives
// back.
//
// Buffers kept here count against no budget, yet they do not add to the
// memory bound: a buffer is made only when none is free, so the buffers
// alive are at most those of the batches in flight at one time.
type buffers struct{ free chan []byte }

// buffersKept is how many free buffers a worker keeps when they come back
// at staging: one batch is open while the one before it is being staged,
// and the buffer staged before that waits here for the next batch. When
// they come back at the end of a load, a load's worth of them is kept
// (load.max_files): they all come back at once, and the next batches
// take them one by one.
const buffersKept = 1

func newBuffers(kept int) *buffers { return &buffers{free: make(chan []byte, max(1, kept))} }

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
