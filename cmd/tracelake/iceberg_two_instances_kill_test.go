package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// Two load-mode processes (otlp.instance 0 and 1) taking traces and logs
// into one set of Iceberg tables, each killed with SIGKILL at random
// moments and restarted, independently, while a client of its own tenant
// sends to it (retrying each request until it is answered 200) and
// tracelake compact and expire run beside them: every span answered 200
// is stored under its tenant, none more often than it was sent, each kept
// once by the dedup model, and verify is OK for both instances' sequences.
func TestLongTwoLoadModeInstancesKill9BesideMaintenance(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary while clients send")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	dir := t.TempDir()
	type instance struct{ addr, cfg, tenant string }
	var inst []instance
	for i, tenant := range []string{"team-a", "team-b"} {
		addr := freeAddr(t)
		cfg := filepath.Join(dir, fmt.Sprintf("tracelake-%d.yaml", i))
		text := fmt.Sprintf("otlp: {mode: load, http: %q, signals: [traces, logs], instance: %d}\ntenancy: {kafka_header: \"\"}\n"+
			"sink: {type: iceberg, iceberg: {catalog: %q, warehouse: %q}}\nmerge: {every: 300ms}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
			addr, i, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		inst = append(inst, instance{addr, cfg, tenant})
	}
	const listening = "OTLP receiver listening"
	// The tables made once, not by two first starts racing to.
	startRunUntil(t, bin, inst[0].cfg, "prepare", listening).stop(t)

	var mu sync.Mutex
	sends, acked := map[string]int{}, map[string]bool{} // by tenant/trace/span id
	deadline := time.Now().Add(2 * time.Minute)
	post := func(in instance, path string, body []byte, keys []string) error {
		for {
			mu.Lock()
			for _, k := range keys {
				sends[k]++
			}
			mu.Unlock()
			req, _ := http.NewRequest(http.MethodPost, "http://"+in.addr+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("X-Scope-OrgID", in.tenant)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					for _, k := range keys {
						acked[k] = true
					}
					mu.Unlock()
					return nil
				}
				if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests {
					return fmt.Errorf("%s answered %d", path, resp.StatusCode)
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not stored by the deadline: %v", path, err)
			}
			time.Sleep(20 * time.Millisecond) // the client's backoff while its process is down
		}
	}
	var clients sync.WaitGroup
	errs := make(chan error, len(inst)+1)
	for i, in := range inst {
		clients.Go(func() {
			g := tracegen.New(uint64(100 + i))
			for range 40 {
				td := g.OTLPTrace()
				var keys []string
				for _, rs := range td.ResourceSpans().All() {
					for _, ss := range rs.ScopeSpans().All() {
						for _, s := range ss.Spans().All() {
							keys = append(keys, in.tenant+"/"+s.TraceID().String()+s.SpanID().String())
						}
					}
				}
				tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
				lb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(tracegen.LogsOf(td))
				if err := post(in, "/v1/traces", tb, keys); err != nil {
					errs <- err
					return
				}
				if err := post(in, "/v1/logs", lb, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	maintStop, maintDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(maintDone)
		for {
			select {
			case <-maintStop:
				return
			default:
			}
			for _, args := range [][]string{{"compact", "--target-size", "1MiB", "--min-age", "-24h"}, {"expire", "--older-than", "0s"}} {
				if out, err := exec.Command(bin, append(args, "--config", inst[0].cfg)...).CombinedOutput(); err != nil {
					t.Logf("%s: %v\n%s", args[0], err, out)
				}
			}
		}
	}()
	// Each instance killed three times at random moments, the two
	// independently.
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill moments from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	var killers sync.WaitGroup
	for _, in := range inst {
		var waits []time.Duration
		for range 3 {
			waits = append(waits, time.Duration(rng.IntN(1500))*time.Millisecond)
		}
		killers.Go(func() {
			for _, d := range waits {
				cmd := exec.Command(bin, "run", "--config", in.cfg)
				if err := cmd.Start(); err != nil {
					errs <- err
					return
				}
				time.Sleep(d) // a random moment of the stream
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
			}
		})
	}
	killers.Wait()
	var runs []*child
	for i, in := range inst {
		runs = append(runs, startRunUntil(t, bin, in.cfg, fmt.Sprintf("run last %d", i), listening))
	}
	clients.Wait()
	close(maintStop)
	<-maintDone
	for _, r := range runs {
		r.stop(t)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, in := range inst {
		if rep := verifyJSON(t, bin, in.cfg, 0); !rep.OK {
			t.Errorf("verify with %s: problems %q", filepath.Base(in.cfg), rep.Problems)
		}
	}
	cfgPath := inst[0].cfg
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	stored := sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || trace_id || span_id AS k, count(*) AS n FROM otel_spans GROUP BY ALL`)
	kept := sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || trace_id || span_id AS k, count(*) AS n FROM otel_spans_dedup GROUP BY ALL`)
	mu.Lock()
	defer mu.Unlock()
	for k, n := range sends {
		switch s := stored[k]; {
		case acked[k] && s == 0:
			t.Errorf("span %s answered 200, not stored", k)
		case s > n:
			t.Errorf("span %s stored %d times, sent %d times", k, s, n)
		}
	}
	for k, s := range stored {
		if sends[k] == 0 {
			t.Errorf("span %s stored %d times, never sent under that tenant", k, s)
		}
		if kept[k] != 1 {
			t.Errorf("span %s stored %d times, kept %d times by the dedup model", k, s, kept[k])
		}
	}
	t.Logf("%d spans sent, %d stored", len(sends), len(stored))
}
