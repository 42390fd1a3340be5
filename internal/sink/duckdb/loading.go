package duckdb

import "sync"

// Loading says whether loads into a database are in flight, for readers of
// the same database that give way to them (query.DuckDBOptions.Loads): a
// read in the loading process competes with the loads for its cores, and
// ingest comes first. One Loading serves every sink of a database (Open
// makes it, Beside shares it). It only signals: nothing waits on it but
// readers, and a load never waits for a reader.
type Loading struct {
	mu       sync.Mutex
	inFlight int
	idle     chan struct{} // closed while inFlight is 0; a new one when a load begins
}

func newLoading() *Loading {
	idle := make(chan struct{})
	close(idle)
	return &Loading{idle: idle}
}

// Idle is closed once no load is in flight: at once when none is, else
// when the last of those in flight ends (a load that begins meanwhile
// keeps it open). Take it again after it closed: a later load has a new
// one.
func (l *Loading) Idle() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle
}

// begin marks a load in flight until end is called (once).
func (l *Loading) begin() (end func()) {
	l.mu.Lock()
	if l.inFlight == 0 {
		l.idle = make(chan struct{})
	}
	l.inFlight++
	l.mu.Unlock()
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inFlight--; l.inFlight == 0 {
			close(l.idle)
		}
	})
}
