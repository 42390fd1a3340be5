package directload

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// faultySink is a sink under test, a second sink on the same tables (a
// loader in another process) and the faults it can be given.
type faultySink struct {
	sink, other sink.Sink
	// loseCommitReply makes the next load's commit land and its reply
	// be lost (on Iceberg, the reply of every table's commit of it).
	loseCommitReply func()
	// failCommit makes the next load's commit fail without landing.
	failCommit func()
	// readBack, where set, lets a sink that reads a lost reply's commit
	// back (Iceberg) do so: by default the catalog is unreachable for a
	// moment after the lost reply, and the next attempt must find it.
	readBack func()
	// stored reads the spans by span id and the dead letters stored.
	stored func(t *testing.T) (spans map[string]int, deadLetters int)
}

// faultySinks are the sinks whose commit reply can be lost, by name.
var faultySinks = map[string]func(t *testing.T) *faultySink{
	"duckdb":   duckdbFaulty,
	"databend": databendFaulty,
	"iceberg":  icebergFaulty,
}

// duckdbFaulty is DuckDB, where a commit reported failed after it landed
// is rare (a fatal error after the WAL was written): the error is given
// after a load that committed. DuckDB has one writer, so the other
// process's loader shares the sink.
func duckdbFaulty(t *testing.T) *faultySink {
	f := newFixture(t)
	var mu sync.Mutex
	var lose, fail bool
	f.sink.failLoad = func(int) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("disk full")
		}
		return nil
	}
	f.sink.afterLoad = func(int) error {
		mu.Lock()
		defer mu.Unlock()
		if lose {
			lose = false
			return errors.New("connection reset")
		}
		return nil
	}
	return &faultySink{sink: f.sink, other: f.sink.Sink,
		loseCommitReply: func() { mu.Lock(); lose = true; mu.Unlock() },
		failCommit:      func() { mu.Lock(); fail = true; mu.Unlock() },
		stored: func(t *testing.T) (map[string]int, int) {
			spans := map[string]int{}
			rows, err := f.db.Query("SELECT span_id FROM otel_spans")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				spans[id]++
			}
			return spans, int(f.count(t, "SELECT count(*) FROM otel_spans_dlq"))
		}}
}

// commitFaults makes srv's next COMMIT after lose() land with its reply
// dropped, and its next COMMIT after fail() fail with OCCRetryFailure
// (2011, rolled back: common/exception/src/exception_code.rs).
func commitFaults(srv *databendtest.Server) (lose, fail func()) {
	var l, f bool // guarded by the server's lock (Set)
	srv.Set(func() {
		srv.DropReply = func(sql string) bool {
			drop := sql == "COMMIT" && l
			l = l && !drop
			return drop
		}
		srv.CommitError = func() int {
			if f {
				f = false
				return 2011
			}
			return 0
		}
	})
	return func() { srv.Set(func() { l = true }) }, func() { srv.Set(func() { f = true }) }
}

// databendFaulty is the Databend test server: a COMMIT whose reply is
// dropped after it was applied, or that fails with OCCRetryFailure (2011,
// rolled back: common/exception/src/exception_code.rs).
func databendFaulty(t *testing.T) *faultySink {
	srv, s := databendSpans(t, false)
	other, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "otel_spans", Typed: &otel.Spans,
		Stage: "~", Prefix: "tracelake/otel_spans/", Purge: true, Uploads: 1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if err := other.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	lose, fail := commitFaults(srv)
	return &faultySink{sink: s, other: other,
		loseCommitReply: lose,
		failCommit:      fail,
		stored: func(t *testing.T) (map[string]int, int) {
			spans := map[string]int{}
			for _, r := range srv.Rows("otel_spans") {
				var id string
				if err := json.Unmarshal(r["span_id"], &id); err != nil {
					t.Fatal(err)
				}
				spans[id]++
			}
			return spans, len(srv.Rows("otel_spans_dlq"))
		}}
}

// icebergFaulty is Iceberg behind the REST catalog test server, whose
// commits can land and answer 503 (a gateway that lost the catalog's
// reply) or answer 500 without landing.
func icebergFaulty(t *testing.T) *faultySink {
	dir := t.TempDir()
	open := func(catalog string) *iceberg.Sink {
		s, err := iceberg.Open(context.Background(), iceberg.Options{Table: otel.Spans.Name, Typed: &otel.Spans,
			Catalog: catalog, Warehouse: filepath.Join(dir, "warehouse"), REST: iceberg.REST{Token: "token"}, Namespace: "tracelake"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	rest := icebergtest.StartREST(t, open(filepath.Join(dir, "catalog.db")).Catalog(), "token")
	rest.GoneAfterLostReply.Store(true)
	s, other := open(rest.URL), open(rest.URL)
	for _, s := range []*iceberg.Sink{s, other} {
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return &faultySink{sink: s, other: other,
		// Two: a load commits its dead letters, then its spans.
		loseCommitReply: func() { rest.LoseCommitReplies.Store(2) },
		failCommit:      func() { rest.FailCommits.Store(1) },
		readBack:        func() { rest.GoneAfterLostReply.Store(false) },
		stored: func(t *testing.T) (map[string]int, int) {
			raw, _ := s.Identifiers()
			spans := spanIDsIn(t, s, raw)
			dlq, err := s.Stored(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, o := range dlq {
				n += o.Count()
			}
			return spans, int(n)
		}}
}

// startLoader starts a traces loader of partition 0 into s, closed with
// the test.
func startLoader(t *testing.T, s sink.Sink) *Loader {
	t.Helper()
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Start(context.Background(), Options{Sink: s, Decoder: dec, Signal: otel.SignalTraces,
		MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// checkOnce checks that the sink holds each of the spans once and want
// dead letters.
func checkOnce(t *testing.T, fs *faultySink, spans, deadLetters int) {
	t.Helper()
	stored, dlq := fs.stored(t)
	if len(stored) != spans {
		t.Errorf("%d distinct spans stored, want %d", len(stored), spans)
	}
	for id, n := range stored {
		if n != 1 {
			t.Errorf("span %s stored %d times", id, n)
		}
	}
	if dlq != deadLetters {
		t.Errorf("%d dead letters stored, want %d", dlq, deadLetters)
	}
}

// A load whose commit landed but whose reply was lost (Databend: the
// COMMIT's HTTP reply; Iceberg: the catalog's reply to the commit;
// DuckDB: an error after the commit landed) is tried again with the same
// staged files, and the next attempt finds its positions in the ledger.
// They are its own, committed by its first attempt: its requests are
// stored and must be answered so. Answered 503, as a fence by another
// loader is, their clients send them again, and every span and dead
// letter of the load is stored twice.
func TestALoadWhoseCommitReplyWasLostIsAnsweredStored(t *testing.T) {
	for name, open := range faultySinks {
		t.Run(name, func(t *testing.T) {
			fs := open(t)
			gate := make(chan struct{})
			cs := &countingSink{Sink: fs.sink, beforeLoad: func(n int) {
				switch n {
				case 1:
					<-gate // the others queue behind the first load
				case 2:
					fs.loseCommitReply() // the second load's first attempt
				}
			}}
			var decoded atomic.Int64
			dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
			if err != nil {
				t.Fatal(err)
			}
			l, err := Start(context.Background(), Options{Sink: cs, Decoder: countingDecoder{dec, &decoded},
				Signal: otel.SignalTraces, MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			bodies, spans := requestBodies(t, 5)
			garbage := []byte{0xff, 0xff, 0xff, 0xff} // refused by the decoder: a dead letter
			first := make(chan error, 1)
			go func() { first <- forward(l, bodies[0]) }()
			waitFor(t, func() bool { return cs.loads.Load() == 1 })
			// The second load: three requests of spans and a refused one.
			second := [][]byte{bodies[1], bodies[2], garbage, bodies[3]}
			errs := make([]chan error, len(second))
			for i, b := range second {
				errs[i] = make(chan error, 1)
				go func() { errs[i] <- forward(l, b) }()
				waitFor(t, func() bool { return decoded.Load() == int64(i+2) }) // in order
			}
			close(gate)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			var retry [][]byte
			for i, ch := range errs {
				if err := <-ch; err != nil {
					t.Errorf("request %d of a load that committed (its reply lost) was answered %v", i, err)
					retry = append(retry, second[i]) // as its client does
				}
			}
			if n := cs.loads.Load(); n < 3 {
				t.Fatalf("%d loads: the lost reply was not retried", n)
			}
			for _, b := range append(retry, bodies[4]) {
				if err := forward(l, b); err != nil {
					t.Fatal(err)
				}
			}
			checkOnce(t, fs, spans, 1)
		})
	}
}

// Two loaders with one otlp.instance in two processes (a
// misconfiguration): b's load fails without committing, a loads the same
// position meanwhile, and b's next attempt, with the same staged files,
// finds it in the ledger. It is a's, not b's own: b's request must be
// answered with a retry (stored under a's position, or answered stored,
// it would be lost), and the retry stores it once.
func TestALoadRetriedAfterAnotherLoaderTookItsPositionIsRefused(t *testing.T) {
	for name, open := range faultySinks {
		t.Run(name, func(t *testing.T) {
			fs := open(t)
			aDone := make(chan struct{})
			cs := &countingSink{Sink: fs.sink, beforeLoad: func(n int) {
				switch n {
				case 1:
					fs.failCommit() // b's first attempt fails
				case 2:
					<-aDone // b's second attempt waits for a's load
				}
			}}
			b := startLoader(t, cs)
			a := startLoader(t, fs.other) // both resume at 0
			bodies, spans := requestBodies(t, 2)
			bErr := make(chan error, 1)
			go func() { bErr <- forward(b, bodies[0]) }()
			waitFor(t, func() bool { return cs.loads.Load() == 2 })
			if err := forward(a, bodies[1]); err != nil {
				t.Fatal(err)
			}
			close(aDone)
			if err := <-bErr; err == nil {
				t.Error("a request whose position another loader took was answered stored")
			} else if err := forward(b, bodies[0]); err != nil { // its client's retry
				t.Fatal(err)
			}
			checkOnce(t, fs, spans, 0)
		})
	}
}

// A load whose last attempt's commit landed but whose reply was lost:
// no attempt comes after it to find the commit in the ledger, so the
// load itself must tell, or its requests are answered 503 while stored,
// and their clients' retries store every span twice.
func TestALoadWhoseLastAttemptsReplyWasLostIsAnsweredStored(t *testing.T) {
	for name, open := range faultySinks {
		t.Run(name, func(t *testing.T) {
			fs := open(t)
			if fs.readBack != nil {
				fs.readBack()
			}
			cs := &countingSink{Sink: fs.sink, beforeLoad: func(n int) {
				if n < LoadAttempts {
					fs.failCommit()
				} else if n == LoadAttempts {
					fs.loseCommitReply()
				}
			}}
			l := startLoader(t, cs)
			bodies, spans := requestBodies(t, 2)
			err := forward(l, bodies[0])
			if n := cs.loads.Load(); n != LoadAttempts {
				t.Fatalf("%d attempts, want %d", n, LoadAttempts)
			}
			if err != nil {
				t.Errorf("a request whose load's last attempt committed (its reply lost) was answered %v", err)
				if err := forward(l, bodies[0]); err != nil { // its client's retry
					t.Fatal(err)
				}
			}
			if err := forward(l, bodies[1]); err != nil {
				t.Fatal(err)
			}
			checkOnce(t, fs, spans, 0)
		})
	}
}
