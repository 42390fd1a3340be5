package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// query.http on a run loading every signal (otlp.signals): Tempo, Loki
// and Prometheus answer on one listener from the tables the run loads,
// each request answered for the tenant it names, and /ready.
func TestGrafanaAPIsWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin := buildBinary(t)
	dir := t.TempDir()
	otlpAddr, apiAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(
		"otlp: {http: %q, signals: [traces, logs, metrics]}\nsink: {duckdb: {path: %q}}\nquery: {http: %q}\nmetrics: {listen: \"\"}\n",
		otlpAddr, filepath.Join(dir, "g.duckdb"), apiAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	defer func() {
		_ = run.cmd.Process.Signal(syscall.SIGTERM)
		if err := run.cmd.Wait(); err != nil {
			t.Errorf("run: %v\n%s", err, run.log)
		}
	}()

	g, meter := tracegen.New(9), tracegen.NewMeter()
	td := g.OTLPTrace()
	ld, md := tracegen.LogsOf(td), meter.Record(td)
	tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	lb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	mb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	for path, body := range map[string][]byte{"/v1/traces": tb, "/v1/logs": lb, "/v1/metrics": mb} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+otlpAddr+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("X-Scope-OrgID", "team-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s answered %d", path, resp.StatusCode)
		}
	}
	// Each request was answered once its load committed: the APIs see it.
	get := func(tenant, path string, v url.Values, accept ...string) (int, []byte) {
		t.Helper()
		u := "http://" + apiAddr + path
		if v != nil {
			u += "?" + v.Encode()
		}
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if tenant != "" {
			req.Header.Set("X-Scope-OrgID", tenant)
		}
		for _, a := range accept {
			req.Header.Set("Accept", a)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := get("", "/ready", nil); code != http.StatusOK || !strings.Contains(string(body), "ready") {
		t.Errorf("/ready: %d %s", code, body)
	}

	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	root := spans.At(0)
	id := root.TraceID()
	start, end := root.StartTimestamp().AsTime(), root.EndTimestamp().AsTime()
	window := url.Values{"start": {fmt.Sprint(start.Unix() - 60)}, "end": {fmt.Sprint(end.Unix() + 60)}}
	for tenant, want := range map[string]int{"team-a": spans.Len(), "team-b": 0} {
		// As Grafana asks: protobuf, tempopb.Trace (its batches are
		// OTLP's resource spans, field 1, as in TracesData).
		code, body := get(tenant, "/api/traces/"+hex.EncodeToString(id[:]), window, "application/protobuf")
		got := 0
		if code == http.StatusOK {
			tr, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
			if err != nil {
				t.Fatalf("Tempo's trace as protobuf: %v", err)
			}
			got = tr.SpanCount()
		}
		if got != want || (want == 0) != (code == http.StatusNotFound) {
			t.Errorf("Tempo, %s: %d spans (status %d), want %d", tenant, got, code, want)
		}
	}

	for tenant, want := range map[string]int{"team-a": ld.LogRecordCount(), "team-b": 0} {
		v := url.Values{"query": {`{service_name="support-agent"}`}, "start": {fmt.Sprint(start.Add(-time.Minute).UnixNano())},
			"end": {fmt.Sprint(end.Add(time.Minute).UnixNano())}, "limit": {"1000"}}
		code, body := get(tenant, "/loki/api/v1/query_range", v)
		var ans struct {
			Data struct {
				Result []struct {
					Values [][2]string `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ans); code != http.StatusOK || err != nil {
			t.Fatalf("Loki, %s: %d %v\n%s", tenant, code, err, body)
		}
		got := 0
		for _, s := range ans.Data.Result {
			got += len(s.Values)
		}
		if got != want {
			t.Errorf("Loki, %s: %d lines, want %d", tenant, got, want)
		}
	}

	at := fmt.Sprint(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Timestamp().AsTime().Unix() + 1) // a second past the point (lookback 5m)
	for tenant, want := range map[string]string{"team-a": "1", "team-b": ""} {
		code, body := get(tenant, "/api/v1/query", url.Values{"query": {`count(gen_ai_client_operation_duration_seconds_count) > 0`}, "time": {at}})
		var ans struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ans); code != http.StatusOK || err != nil || ans.Status != "success" {
			t.Fatalf("Prometheus, %s: %d %v\n%s", tenant, code, err, body)
		}
		got := ""
		if len(ans.Data.Result) == 1 {
			got = "1"
		}
		if got != want {
			_, names := get(tenant, "/api/v1/label/__name__/values", nil)
			t.Errorf("Prometheus, %s, at %s: %s; the names: %s", tenant, at, body, names)
		}
	}
}
