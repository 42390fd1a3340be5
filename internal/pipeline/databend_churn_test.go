package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// openDatabendSink opens and prepares a Databend sink on srv, as one
// tracelake process would: each process has its own Sink (its own kept
// files, its own load-history disagreement counts).
func openDatabendSink(t *testing.T, srv *databendtest.Server, table string) *databend.Sink {
	t.Helper()
	s, err := databend.Open(databend.Options{
		DSN: srv.DSN(""), Table: table, Stage: "~", Prefix: "tracelake/" + table + "/",
		Purge: true, Zstd: true, Uploads: 4, Timeout: 10 * time.Second, Log: testLog(t),
	})
	must(t, err)
	must(t, s.Prepare(context.Background()))
	return s
}

// databendConfig points cfg at srv, as a Databend config would.
func databendConfig(t *testing.T, cfg *config.Config, srv *databendtest.Server) {
	t.Helper()
	cfg.Sink.Type = config.SinkDatabend
	cfg.Sink.Databend.DSN = srv.DSN("")
	cfg.Sink.DuckDB = config.Default().Sink.DuckDB // read only with sink.type duckdb
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// databendOffsets counts each (partition, offset) of topic in the raw and
// dead-letter tables of table.
func databendOffsets(t *testing.T, srv *databendtest.Server, table string) map[[2]int64]int {
	t.Helper()
	seen := map[[2]int64]int{}
	for _, r := range srv.Rows(table) {
		var part, off int64
		must(t, json.Unmarshal(r["kpartition"], &part))
		must(t, json.Unmarshal(r["koffset"], &off))
		seen[[2]int64{part, off}]++
	}
	for _, r := range srv.Rows(table + "_dlq") {
		var part, off int64
		must(t, json.Unmarshal(r["partition"], &part))
		must(t, json.Unmarshal(r["offset"], &off))
		seen[[2]int64{part, off}]++
	}
	return seen
}

// checkExactlyOnce fails unless every offset below the log end of each of
// parts partitions is stored exactly once in the raw ∪ dead-letter tables,
// then runs verify over Databend.
func checkExactlyOnce(t *testing.T, cfg *config.Config, srv *databendtest.Server, s *databend.Sink, table string, n int) {
	t.Helper()
	seen := databendOffsets(t, srv, table)
	marks := watermarksOf(t, cfg)
	total := 0
	for tp, m := range marks {
		for o := m.Low; o < m.High; o++ {
			total++
			if c := seen[[2]int64{int64(tp.Partition), o}]; c != 1 {
				t.Errorf("partition %d offset %d stored %d times", tp.Partition, o, c)
			}
		}
	}
	if total != n || len(seen) != n {
		t.Errorf("%d offsets in Kafka, %d distinct stored; want %d", total, len(seen), n)
	}
	main, dlq, ledger := s.Tables()
	rep, err := verify.Run(context.Background(), s, verify.Tables{Main: main, DLQ: dlq, Ledger: ledger, Raw: true, Topic: databend.TopicExpr}, marks, true)
	must(t, err)
	if !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
}

// Two processes share a consumer group and one Databend. The second joins
// and leaves again and again while loads are slow (a COPY outlasting the
// revoke's wait, so the former owner's load and the new owner's load of a
// partition run at once), COMMIT replies are lost or land late, and
// uploads are refused now and then. Every record ends up once in the raw
// or dead-letter table, and verify passes.
func TestDatabendChurnStoresEveryRecordOnce(t *testing.T) {
	const n = 12_000
	c := newCluster(t, 4)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Workers = 2
	cfg.Batch.MaxRecords = 300
	cfg.Load.MaxFiles = 3
	cfg.Kafka.RebalanceTimeout = config.Duration(2 * time.Second) // revokes wait 1s
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	databendConfig(t, cfg, srv)
	srv.WaitTime = 200 * time.Millisecond
	var statements, commits, uploads int
	srv.Set(func() {
		srv.StatementTime = func(sql string) time.Duration {
			if strings.HasPrefix(sql, `COPY INTO "trace_raw" `) {
				statements++
				if statements%4 == 0 {
					return 1500 * time.Millisecond // outlasts the revoke's wait
				}
			}
			return 0
		}
		srv.DropReply = func(sql string) bool {
			if sql == "COMMIT" {
				commits++
				return commits%7 == 0
			}
			return false
		}
		late := 0
		srv.LateCommit = func() bool { late++; return late%11 == 0 }
		srv.UploadStatus = func(path string) int {
			uploads++
			if uploads%13 == 0 {
				return http.StatusServiceUnavailable
			}
			return 0
		}
	})
	a := openDatabendSink(t, srv, "trace_raw")
	opts := pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t)}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- pipeline.Run(ctx, context.Background(), cfg, a, opts) }()
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), cl, topic, n, 5, nil) }()

	for i := range 6 {
		b := openDatabendSink(t, srv, "trace_raw") // a new process each time
		bctx, bcancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- pipeline.Run(bctx, context.Background(), cfg, b, opts) }()
		time.Sleep(time.Duration(1200+300*i) * time.Millisecond)
		bcancel()
		if err := <-done; err != nil && !strings.Contains(err.Error(), "will be read again on the next start") {
			t.Fatalf("second member, round %d: %v", i, err)
		}
	}
	must(t, <-produced)
	srv.Set(func() {
		srv.StatementTime, srv.DropReply, srv.LateCommit, srv.UploadStatus = nil, nil, nil, nil
	})
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !strings.Contains(err.Error(), "will be read again on the next start") {
			t.Fatal(err)
		}
	}
	runUntilIdle(t, cfg, openDatabendSink(t, srv, "trace_raw"), nil)
	checkExactlyOnce(t, cfg, srv, a, "trace_raw", n)
	_ = fmt.Sprint
}
