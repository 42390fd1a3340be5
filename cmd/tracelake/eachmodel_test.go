package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/config"
)

func modelsNamed(n int) []config.Model {
	out := make([]config.Model, n)
	for i := range out {
		out[i] = config.Model{Name: fmt.Sprintf("m%d", i)}
	}
	return out
}

// Up to n merges run side by side: two merges each wait to see the other
// running (they would wait forever, and fail the test, one at a time);
// no more than n are ever in flight; every model is merged once.
func TestEachModelMergesSideBySide(t *testing.T) {
	const n = 3
	var (
		mu       sync.Mutex
		running  int
		most     int
		done     = make([]atomic.Int32, 12)
		together = make(chan struct{})
		once     sync.Once
	)
	started := eachModel(context.Background(), modelsNamed(len(done)), n, func(i int, m config.Model) {
		mu.Lock()
		running++
		most = max(most, running)
		if running == 2 {
			once.Do(func() { close(together) })
		}
		mu.Unlock()
		select {
		case <-together:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: no other merge ran beside it in 30s", m.Name)
		}
		mu.Lock()
		running--
		mu.Unlock()
		done[i].Add(1)
	})
	if started != len(done) {
		t.Errorf("started %d merges of %d", started, len(done))
	}
	if most > n {
		t.Errorf("%d merges in flight, want at most %d", most, n)
	}
	for i := range done {
		if got := done[i].Load(); got != 1 {
			t.Errorf("m%d merged %d times", i, got)
		}
	}
}

// Once ctx ends no merge starts; those started finish.
func TestEachModelStopsStartingWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var merged atomic.Int32
	started := eachModel(ctx, modelsNamed(10), 1, func(i int, _ config.Model) {
		merged.Add(1)
		if i == 3 {
			cancel()
		}
	})
	if got := merged.Load(); got != 4 || started != 4 {
		t.Errorf("%d merges (%d said started), want the 4 started before the cancel", got, started)
	}
}
