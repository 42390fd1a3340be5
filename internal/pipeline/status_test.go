package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
)

// The status page shows the real workers' partitions: while the sink is
// down, the whole partition as lag and the load error; once loaded, ledger,
// committed offset and high watermark all at the produced count, with an
// owner and a last load.
func TestStatusPageFromWorkers(t *testing.T) {
	counts := []int{7, 13, 21}
	c := newCluster(t, int32(len(counts)))
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p, n := range counts {
		for i := range n {
			produce(t, cl, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(fmt.Sprintf(`{"p":%d,"i":%d}`, p, i))})
		}
	}
	cfg := testConfig(t, c)
	s := openSink(t, cfg)

	run := func(snk sink.Sink, status *obs.Status) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		log := slog.New(obs.KeepErrors(testLog(t).Handler(), status))
		go func() {
			done <- pipeline.Run(ctx, context.Background(), cfg, snk, pipeline.RunOptions{
				RetryBase: 10 * time.Millisecond, Log: log, Status: status})
		}()
		return func() { cancel(); <-done }
	}
	lagOf := func(st *obs.Status) map[int32]int64 {
		out := map[int32]int64{}
		for _, p := range st.Snapshot().Partitions {
			out[p.Partition] = p.Lag()
		}
		return out
	}

	down := obs.NewStatus()
	stop := run(downSink{s}, down)
	await(t, "every partition's lag is its whole length", func() bool {
		lag := lagOf(down)
		for p, n := range counts {
			if lag[int32(p)] != int64(n) {
				return false
			}
		}
		return true
	})
	await(t, "the load error is listed", func() bool {
		for _, e := range down.Errors() {
			if strings.Contains(e.Text, "injected: database down") && strings.Contains(e.Text, "worker=") {
				return true
			}
		}
		return false
	})
	stop()

	up := obs.NewStatus()
	stop = run(s, up)
	defer stop()
	await(t, "every partition loaded and committed", func() bool {
		ps := up.Snapshot().Partitions
		if len(ps) != len(counts) {
			return false
		}
		for _, p := range ps {
			n := int64(counts[p.Partition])
			if p.Next != n || p.Committed != n || p.HWM != n || p.Lag() != 0 || p.LastLoad.IsZero() {
				return false
			}
		}
		return true
	})
	for _, p := range up.Snapshot().Partitions {
		if p.Worker < 0 || p.Worker >= cfg.Workers {
			t.Errorf("partition %d owned by worker %d of %d", p.Partition, p.Worker, cfg.Workers)
		}
	}

	srv, err := obs.Listen("127.0.0.1:0", obs.New(), up, func() string { return "" }, testLog(t))
	must(t, err)
	defer srv.Shutdown(context.Background())
	resp, err := http.Get("http://" + srv.Addr() + "/")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	for p, n := range counts {
		// topic, partition, worker, ledger, committed, high watermark, lag 0
		row := fmt.Sprintf(`<tr><td class="l">%s</td><td>%d</td><td>\d</td><td>%d</td><td>%d</td><td>%d</td><td class="lag">0</td>`, topic, p, n, n, n)
		if !regexp.MustCompile(row).Match(body) {
			t.Errorf("status page has no row %s:\n%s", row, body)
		}
	}
}
