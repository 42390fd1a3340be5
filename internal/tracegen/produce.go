package tracegen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce writes n spans to topic and waits until every one is acknowledged.
// progress, if not nil, is called with the number acknowledged so far, at
// most every 100ms and once at the end.
func Produce(ctx context.Context, cl *kgo.Client, topic string, n int, seed uint64, progress func(done int)) error {
	g := New(seed)
	var (
		mu       sync.Mutex
		firstErr error
		done     int
		wg       sync.WaitGroup
	)
	lastReport := time.Now()
	for range n {
		if ctx.Err() != nil {
			break
		}
		value := g.Append(make([]byte, 0, 1200))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: g.Key(), Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			done++
			if progress != nil && time.Since(lastReport) > 100*time.Millisecond {
				lastReport = time.Now()
				progress(done)
			}
		})
	}
	wg.Wait()
	if progress != nil {
		progress(done)
	}
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	return ctx.Err()
}
