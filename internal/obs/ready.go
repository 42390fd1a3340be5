package obs

import "sync/atomic"

// Readiness is what /readyz reports: ready once a worker has joined the
// consumer group and the sink has answered (its tables are prepared).
type Readiness struct {
	joined, sink atomic.Bool
}

// Join marks that a worker joined the group.
func (r *Readiness) Join() { r.joined.Store(true) }

// Joined reports whether a worker joined the group.
func (r *Readiness) Joined() bool { return r.joined.Load() }

// SinkReady marks that the sink answered.
func (r *Readiness) SinkReady() { r.sink.Store(true) }

// Why says what is not ready yet, or "" when ready.
func (r *Readiness) Why() string {
	switch {
	case !r.sink.Load():
		return "sink not prepared"
	case !r.joined.Load():
		return "not joined to the consumer group"
	}
	return ""
}
