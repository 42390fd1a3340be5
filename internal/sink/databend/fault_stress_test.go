package databend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// Three processes load overlapping batches of one partition at once while
// Databend rejects some rows, replies to COPY and COMMIT are lost, commits
// land late (at any statement of anyone, LandLate) and commits conflict.
// Every offset must end up once in the raw or the dead-letter table, and
// the ledger must count each once. Seeded, so a failure repeats.
func TestFaultStressStoresEachOffsetOnce(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { faultStress(t, seed) })
	}
}

func faultStress(t *testing.T, seed uint64) {
	srv, first := prepared(t, "")
	rng := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	roll := func(p float64) bool { mu.Lock(); defer mu.Unlock(); return rng.Float64() < p }
	srv.Reject = func(table string, r databendtest.Row) string {
		var o int64
		_ = json.Unmarshal(r["koffset"], &o)
		if table == "trace_raw" && (o%7 == 3 || o%11 == 5) {
			return fmt.Sprintf("bad row %d", o)
		}
		return ""
	}
	srv.Set(func() {
		srv.DropReply = func(sql string) bool {
			return (sql == "COMMIT" || strings.HasPrefix(sql, "COPY INTO")) && roll(0.2)
		}
		srv.LateCommit = func() bool { return roll(0.3) }
		srv.LandLate = func(string) bool { return roll(0.3) }
		srv.CommitError = func() int {
			if roll(0.05) {
				return databendtest.CodeUnresolvableConflict
			}
			return 0
		}
	})
	procs := 3
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	ctx := context.Background()
	const last = 59
	for i := range procs {
		s := first
		if i > 0 {
			s = open(t, srv, "")
		}
		// Each process read the partition from 0 (the ledger as it was
		// when it was assigned) in batches of its own size, with a
		// decode dead letter here and there.
		size := int64(7 + 5*i)
		var batches []*sink.Batch
		for f := int64(0); f <= last; f += size {
			l := min(f+size-1, last)
			batches = append(batches, batch(0, f, l, f+1))
		}
		files := stage(t, s, batches...)
		wg.Go(func() {
			if err := loadInPairs(ctx, s, files); err != nil {
				errs <- fmt.Errorf("process %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	srv.Set(func() { srv.DropReply, srv.LateCommit, srv.CommitError = nil, nil, nil })
	seen := map[int64]int{}
	for _, o := range offsets(t, srv, 0) {
		seen[o]++
	}
	for _, r := range srv.Rows("trace_raw_dlq") {
		var o int64
		_ = json.Unmarshal(r["offset"], &o)
		seen[o]++
	}
	for o := int64(0); o <= last; o++ {
		if seen[o] != 1 {
			t.Errorf("offset %d stored %d times", o, seen[o])
		}
	}
	if len(seen) != last+1 {
		t.Errorf("%d offsets stored, want %d", len(seen), last+1)
	}
	if rec, dlq := ledgerTotals(t, srv, "trace_raw_ledger"); rec+dlq != last+1 {
		t.Errorf("ledger counts %d rows and %d dead letters, want %d in all", rec, dlq, last+1)
	}
}

// The same in transform mode: rows checked before staging (1.5 into an
// integer column), rows COPY rejects ("many" into INT), and the rest.
func TestFaultStressTransformStoresEachOffsetOnce(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { faultStressTransform(t, seed) })
	}
}

func faultStressTransform(t *testing.T, seed uint64) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("orders", []string{"id", "qty"}, []string{"BIGINT", "INT"})
	openT := func() *databend.Sink {
		s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true, Uploads: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	rng := rand.New(rand.NewPCG(seed, 9))
	var mu sync.Mutex
	roll := func(p float64) bool { mu.Lock(); defer mu.Unlock(); return rng.Float64() < p }
	srv.Set(func() {
		srv.DropReply = func(sql string) bool {
			return (sql == "COMMIT" || strings.HasPrefix(sql, "COPY INTO")) && roll(0.2)
		}
		srv.LateCommit = func() bool { return roll(0.3) }
		srv.LandLate = func(string) bool { return roll(0.3) }
		srv.CommitError = func() int {
			if roll(0.05) {
				return databendtest.CodeUnresolvableConflict
			}
			return 0
		}
	})
	value := func(o int64) string {
		switch {
		case o%7 == 3:
			return fmt.Sprintf(`{"id": %d, "qty": "many"}`, o)
		case o%11 == 5:
			return fmt.Sprintf(`{"id": %d, "qty": 1.5}`, o)
		}
		return fmt.Sprintf(`{"id": %d, "qty": 1}`, o)
	}
	const last = 59
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	ctx := context.Background()
	for i := range 3 {
		s := openT()
		size := int64(7 + 5*i)
		var batches []*sink.Batch
		for f := int64(0); f <= last; f += size {
			var vs []string
			for o := f; o <= min(f+size-1, last); o++ {
				vs = append(vs, value(o))
			}
			batches = append(batches, transformBatch(0, f, vs...))
		}
		files := stage(t, s, batches...)
		wg.Go(func() {
			if err := loadInPairs(ctx, s, files); err != nil {
				errs <- fmt.Errorf("process %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	srv.Set(func() { srv.DropReply, srv.LateCommit, srv.CommitError, srv.LandLate = nil, nil, nil, nil })
	seen := map[int64]int{}
	for _, r := range srv.Rows("orders") {
		var o int64
		_ = json.Unmarshal(r["id"], &o)
		seen[o]++
	}
	for _, r := range srv.Rows("orders_dlq") {
		var o int64
		_ = json.Unmarshal(r["offset"], &o)
		seen[o]++
	}
	for o := int64(0); o <= last; o++ {
		if seen[o] != 1 {
			t.Errorf("offset %d stored %d times", o, seen[o])
		}
	}
	if rec, dlq := ledgerTotals(t, srv, "orders_ledger"); rec+dlq != last+1 {
		t.Errorf("ledger counts %d rows and %d dead letters, want %d in all", rec, dlq, last+1)
	}
}

// loadInPairs loads files two at a time, each load tried up to 40 times
// through the faults (a fatal error ends the tries).
func loadInPairs(ctx context.Context, s sink.Sink, files []sink.File) error {
	for j := 0; j < len(files); j += 2 {
		load := files[j:min(j+2, len(files))]
		var err error
		for range 40 {
			if _, err = s.Load(ctx, load); err == nil || errors.Is(err, sink.ErrFatal) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("files %d: %w", j, err)
		}
	}
	return nil
}
