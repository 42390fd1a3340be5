package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// Kafka mode beside maintenance, at random: two loaders (one behind a
// REST catalog whose commits sometimes lose their reply or fail) take
// turns owning the partitions, stale owners load what the other already
// loaded, loaders "crash" (their staged batches dropped without a
// commit, a new sink opened and prepared), while a third sink, behind the
// same faulty catalog, compacts every day, rewrites manifests and expires
// every snapshot but the current. At the end every offset is once in the
// raw or the dead-letter table, in the right one. (Passes: written to
// hunt lost or doubled rows where maintenance races Kafka-mode loads.)
func TestKafkaLoadsBesideMaintenanceAtRandom(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const parts, end = 4, 300
	dead := func(o int64) bool { return o%7 == 3 }
	mk := func(p int32, first, last int64) *sink.Batch {
		var bad []int64
		for o := first; o <= last; o++ {
			if dead(o) {
				bad = append(bad, o)
			}
		}
		b := batch(p, first, last, bad...)
		b.ID = sink.NewBatchID() // each staging named apart, as the pipeline's
		return b
	}
	direct := openSink(t, dir, false)
	if err := direct.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	rest := icebergtest.StartREST(t, openSink(t, dir, false).Catalog(), "token")
	rest.GoneAfterLostReply.Store(true)
	open := func(i int) *iceberg.Sink {
		var s *iceberg.Sink
		if i == 0 {
			s = openREST(t, rest.URL, "tracelake", "token")
		} else {
			s = openSink(t, dir, false)
		}
		for attempt := 0; ; attempt++ {
			err := s.Prepare(ctx)
			if err == nil {
				return s
			}
			if attempt > 20 || errors.Is(err, sink.ErrFatal) {
				t.Errorf("loader %d: prepare: %v", i, err)
				return nil
			}
		}
	}
	stop := make(chan struct{})
	var wg, mwg sync.WaitGroup
	mwg.Go(func() {
		// Behind the REST catalog too: its commits lose replies and fail
		// as the loader's do.
		m := openREST(t, rest.URL, "tracelake", "token")
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
	for i := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			s := open(i)
			for round := 0; round < 60 && s != nil; round++ {
				if i == 0 {
					switch rng.IntN(6) {
					case 0:
						rest.LoseCommitReplies.Store(1)
					case 1:
						rest.FailCommits.Store(1)
					}
				}
				p := int32(rng.IntN(parts))
				pos, err := s.Positions(ctx, []sink.TopicPartition{{Topic: "traces", Partition: p}})
				if err != nil {
					t.Logf("loader %d: positions: %v", i, err)
					continue
				}
				from := pos[sink.TopicPartition{Topic: "traces", Partition: p}]
				// A stale owner reads from where it was: behind.
				if rng.IntN(3) == 0 {
					from = max(0, from-int64(rng.IntN(30)))
				}
				if from >= end {
					continue
				}
				last := min(end-1, from+int64(rng.IntN(40)))
				var files []sink.File
				for o := from; o <= last; o += 15 {
					f, err := s.Stage(ctx, mk(p, o, min(last, o+14)))
					if err != nil {
						t.Errorf("loader %d: stage: %v", i, err)
						return
					}
					files = append(files, f)
				}
				var lerr error
				for try := 0; try < 1+rng.IntN(3); try++ {
					if _, lerr = s.Load(ctx, files); lerr == nil {
						break
					}
				}
				switch {
				case lerr == nil:
				case errors.Is(lerr, sink.ErrFatal):
					t.Errorf("loader %d: fatal: %v", i, lerr)
					return
				case rng.IntN(2) == 0:
					s.Discard(files)
				default:
					// Crashed: a new process, its staged batches gone.
					s.Close()
					s = open(i)
				}
			}
		})
	}
	// Loaders done: stop the maintenance, then one last owner loads what
	// is left.
	wg.Wait()
	close(stop)
	mwg.Wait()
	last := openSink(t, dir, false)
	if err := last.Prepare(ctx); err != nil {
		t.Fatalf("final prepare: %v", err)
	}
	for p := range int32(parts) {
		pos, err := last.Positions(ctx, []sink.TopicPartition{{Topic: "traces", Partition: p}})
		if err != nil {
			t.Fatal(err)
		}
		if from := pos[sink.TopicPartition{Topic: "traces", Partition: p}]; from < end {
			load(t, last, mk(p, from, end-1))
		}
	}
	raw, dlq := stored(t, last, false), stored(t, last, true)
	for p := range int32(parts) {
		var wantRaw, wantDLQ []int64
		for o := int64(0); o < end; o++ {
			if dead(o) {
				wantDLQ = append(wantDLQ, o)
			} else {
				wantRaw = append(wantRaw, o)
			}
		}
		if !equalOffsets(raw[p], wantRaw) {
			t.Errorf("partition %d raw: %d offsets, want %d: %v", p, len(raw[p]), len(wantRaw), diffOffsets(raw[p], wantRaw))
		}
		if !equalOffsets(dlq[p], wantDLQ) {
			t.Errorf("partition %d dead letters: %d offsets, want %d: %v", p, len(dlq[p]), len(wantDLQ), diffOffsets(dlq[p], wantDLQ))
		}
	}
}

func equalOffsets(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func diffOffsets(got, want []int64) string {
	g, w := map[int64]bool{}, map[int64]bool{}
	for _, o := range got {
		g[o] = true
	}
	for _, o := range want {
		w[o] = true
	}
	var missing, extra []int64
	for o := range w {
		if !g[o] {
			missing = append(missing, o)
		}
	}
	for o := range g {
		if !w[o] {
			extra = append(extra, o)
		}
	}
	return fmt.Sprintf("missing %v, extra %v", missing, extra)
}
