package directload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// fencedLandedSink holds its first load until released; its second load's
// first attempt fails (its COMMIT, as found later, landed for the load's
// last position only: another process with the same otlp.instance had
// loaded the ones before), and its second attempt fails with an error no
// retry mends.
type fencedLandedSink struct {
	sink.Sink
	release chan struct{}
	mu      sync.Mutex
	loads   int
	last    sink.Range
}

func (s *fencedLandedSink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	s.mu.Lock()
	s.loads++
	n := s.loads
	if n > 1 {
		s.last = files[0].Ranges[0]
	}
	s.mu.Unlock()
	switch n {
	case 1:
		<-s.release
		return s.Sink.Load(ctx, files)
	case 2:
		return sink.Loaded{}, errors.New("injected: the reply of the commit was lost")
	default:
		return sink.Loaded{}, fmt.Errorf("%w: injected: the sink cannot go on", sink.ErrFatal)
	}
}

func (s *fencedLandedSink) LoadedAs(context.Context, string) ([]sink.Range, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loads < 3 {
		return nil, nil
	}
	r := s.last
	r.First = r.Last // the positions before, another process's
	return []sink.Range{r}, nil
}

// A load whose earlier attempt landed for some of its positions (the
// others another loader's with the same otlp.instance) and whose later
// attempt failed with sink.ErrFatal answers its requests by the ledger
// (stored, and 503 for those another process wrote) and stops the run:
// the sink said it cannot go on. The fencedError of the requests refused
// hid the fatal error from the loop (group.fatal was read only when the
// load returned no error), so the run went on with that sink.
func TestFatalAfterAPartlyFencedLandedAttemptStopsTheRun(t *testing.T) {
	f := newFixture(t)
	s := &fencedLandedSink{Sink: f.sink, release: make(chan struct{})}
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	fatal := make(chan error, 1)
	l, err := Start(context.Background(), Options{Sink: s, Decoder: dec, Signal: otel.SignalTraces,
		MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond, Fatal: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	bodies, _ := requestBodies(t, 3)
	answers := make(chan error, 3)
	go func() { answers <- forward(l, bodies[0]) }()
	for s.loadsSoFar() < 1 {
		time.Sleep(time.Millisecond) // polling: the first load holds
	}
	var wg sync.WaitGroup
	for _, b := range bodies[1:] {
		wg.Add(1)
		go func() { defer wg.Done(); answers <- forward(l, b) }()
	}
	for l.stats.requests.Load() < 3 {
		time.Sleep(time.Millisecond) // polling: both decoded into the next load
	}
	close(s.release)
	wg.Wait()
	var refused, stored int
	for range 3 {
		if err := <-answers; err != nil {
			refused++
		} else {
			stored++
		}
	}
	if refused != 1 || stored != 2 {
		t.Errorf("%d requests refused, %d stored; want the one at another process's position refused", refused, stored)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, sink.ErrFatal) {
			t.Errorf("the run was told to stop with %v, want the sink's fatal error", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the run was not told to stop after the sink's fatal error")
	}
}

func (s *fencedLandedSink) loadsSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}
