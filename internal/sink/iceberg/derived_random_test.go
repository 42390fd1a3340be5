package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// Spans with their operations derived (committed first) at random beside
// maintenance: two loaders take turns on the partition, each also loading
// again what the other already did (a stale owner), a third sink rebuilds
// the operations over and over (merge --rebuild), a fourth compacts every
// day, rewrites the manifests and expires every snapshot but the current.
// At the end every offset's spans and its operation are stored once.
func TestDerivedLoadsBesideRebuildAndMaintenanceAtRandom(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const end = 500
	tp := sink.TopicPartition{Topic: "traces"}
	mk := func(first, last int64) *sink.Batch {
		b := sinktest.DerivedBatch(first, last, 1)
		b.ID = sink.NewBatchID()
		return b
	}
	openDerived(t, dir)
	stop := make(chan struct{})
	var loaders, others sync.WaitGroup
	others.Go(func() {
		m := openDerived(t, dir)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := m.Compact(ctx, 1<<20, time.Now().Add(48*time.Hour), false); err != nil {
				t.Logf("compact: %v", err)
			}
			if _, err := m.RewriteManifests(ctx); err != nil {
				t.Logf("rewrite manifests: %v", err)
			}
			if _, err := m.Expire(ctx, 0, 1); err != nil {
				t.Logf("expire: %v", err)
			}
		}
	})
	others.Go(func() {
		r := openDerived(t, dir)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rb, err := r.BeginRebuild(ctx)
			if err != nil {
				t.Logf("begin rebuild: %v", err)
				continue
			}
			upTo, ok := rb.UpTo()[tp]
			if !ok {
				continue // nothing loaded yet
			}
			if _, err := r.ReplaceDerived(ctx, rb, [][]byte{opRows(upTo+1, 2)}); err != nil {
				t.Logf("rebuild: %v", err)
			}
			time.Sleep(50 * time.Millisecond) // pacing the rebuilds, not waiting for anything
		}
	})
	for i := range 2 {
		loaders.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			s := openDerived(t, dir)
			for range 80 {
				pos, err := s.Positions(ctx, []sink.TopicPartition{tp})
				if err != nil {
					t.Logf("loader %d: positions: %v", i, err)
					continue
				}
				from := pos[tp]
				if rng.IntN(3) == 0 {
					from = max(0, from-int64(rng.IntN(20)))
				}
				if from >= end {
					return
				}
				last := min(end-1, from+int64(rng.IntN(25)))
				var files []sink.File
				for o := from; o <= last; o += 8 {
					f, err := s.Stage(ctx, mk(o, min(last, o+7)))
					if err != nil {
						t.Errorf("loader %d: stage: %v", i, err)
						return
					}
					files = append(files, f)
				}
				var lerr error
				for range 3 {
					if _, lerr = s.Load(ctx, files); lerr == nil {
						break
					}
				}
				if lerr != nil {
					t.Logf("loader %d: load: %v", i, lerr)
					s.Discard(files)
				}
			}
		})
	}
	loaders.Wait()
	close(stop)
	others.Wait()
	last := openDerived(t, dir)
	pos, err := last.Positions(ctx, []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if from := pos[tp]; from < end {
		load(t, last, mk(from, end-1))
	}
	spans := stored(t, last, false)[0]
	if len(spans) != end || spans[0] != 0 || spans[end-1] != end-1 {
		t.Errorf("span offsets: %d, want 0-%d", len(spans), end-1)
	}
	count := map[int64]int{}
	for _, op := range operations(t, last) {
		var o int64
		if _, err := fmt.Sscanf(strings.Fields(op)[1], "%d", &o); err != nil {
			t.Fatalf("operation %q: %v", op, err)
		}
		count[o]++
	}
	var wrong []string
	for o := range int64(end) {
		if count[o] != 1 {
			wrong = append(wrong, fmt.Sprintf("%d×%d", o, count[o]))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 || len(count) != end {
		t.Errorf("operations stored other than once: %v (%d offsets)", wrong, len(count))
	}
}
