package pipeline_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/verify"
)

// The round trip of otlp.mode forward with otlp.forward.topic: requests of
// the three signals, in protobuf and JSON, gzip, zstd and plain, with and
// without a tenant, are forwarded to one topic; a loader per signal
// (kafka.signal, its own group and table) reads that topic back into
// DuckDB: each span, log record and point once, under the tenant its
// request named (tenancy.default without one), none dead-lettered, and
// verify finds no gap (the other signals' messages are covered).
func TestOTLPForwardRoundTripThroughOneTopic(t *testing.T) {
	c := newCluster(t, 2)
	fwd, err := otlp.NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
		map[string]string{otel.SignalTraces: topic, otel.SignalLogs: topic, otel.SignalMetrics: topic}, "X-Scope-OrgID", 8<<20, 64<<20, testLog(t))
	must(t, err)
	defer fwd.Close()
	rcv, err := otlp.Start(otlp.Options{HTTP: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: 64 << 20,
		DefaultTenant: "default", Forward: fwd, Log: testLog(t)})
	must(t, err)
	defer rcv.Shutdown(context.Background())

	post := func(path, ctype, encoding, tenant string, body []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+rcv.Addr["http"]+path, bytes.NewReader(encode(t, encoding, body)))
		must(t, err)
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Content-Encoding", encoding)
		if tenant != "" {
			req.Header.Set("X-Scope-OrgID", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
	}
	td, ld, md := forwardedTraces(3, 4, 5), forwardedLogs(7), forwardedPoints(11)
	traces, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	must(t, err)
	logs, err := plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()
	must(t, err)
	metrics, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	must(t, err)
	post("/v1/traces", "application/x-protobuf", "gzip", "team-a", traces)
	post("/v1/logs", "application/json", "zstd", "team-b", logs)
	post("/v1/metrics", "application/x-protobuf", "", "", metrics)
	post("/v1/traces", "application/x-protobuf", "", " team-c ", traces)

	want := map[string]map[string]int64{
		otel.SignalTraces:  {"team-a": int64(td.SpanCount()), "team-c": int64(td.SpanCount())},
		otel.SignalLogs:    {"team-b": int64(ld.LogRecordCount())},
		otel.SignalMetrics: {"default": int64(md.DataPointCount())},
	}
	for signal, tenants := range want {
		cfg := testConfig(t, c)
		cfg.Kafka.Format, cfg.Kafka.Signal, cfg.Kafka.Group = config.FormatOTLPProto, signal, "loader-"+signal
		cfg.Sink.Table = otel.TableOf(signal).Name
		cfg.GenAI.Operations = "off"
		must(t, cfg.Validate())
		snk := openSinkWith(t, duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
			Typed: otel.TableOf(signal), Log: testLog(t)})
		runUntilIdle(t, cfg, snk, nil)
		for tenant, n := range tenants {
			if got := queryInt(t, snk.DB(), "SELECT count(*) FROM "+cfg.Sink.Table+" WHERE tenant_id = ?", tenant); got != n {
				t.Errorf("%s: %d rows of %s, want %d", cfg.Sink.Table, got, tenant, n)
			}
		}
		if got := queryInt(t, snk.DB(), "SELECT count(DISTINCT tenant_id) FROM "+cfg.Sink.Table); got != int64(len(tenants)) {
			t.Errorf("%s: %d tenants, want %d", cfg.Sink.Table, got, len(tenants))
		}
		if dlq := queryInt(t, snk.DB(), "SELECT count(*) FROM "+cfg.Sink.Table+"_dlq"); dlq != 0 {
			t.Errorf("%s: %d dead letters", cfg.Sink.Table, dlq)
		}
		tn := snk.Tables()
		rep, err := verify.Run(context.Background(), verify.SQLQuerier{DB: snk.DB()},
			verify.Tables{Main: tn.Main, DLQ: tn.DLQ, Ledger: tn.Ledger, Topic: duckdb.TopicExpr}, watermarksOf(t, cfg), true)
		must(t, err)
		if !rep.OK {
			t.Errorf("%s: verify: %v", cfg.Sink.Table, rep.Problems)
		}
	}
}

// encode compresses body with a Content-Encoding ("" for none).
func encode(t *testing.T, encoding string, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch encoding {
	case "gzip":
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(body)
		must(t, w.Close())
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		must(t, err)
		_, _ = w.Write(body)
		must(t, w.Close())
	default:
		return body
	}
	return buf.Bytes()
}

// forwardedTraces is resources × scopes × spans spans, each of its own id.
func forwardedTraces(resources, scopes, spans int) ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range resources {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprint("service-", r))
		for s := range scopes {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(fmt.Sprint("scope-", s))
			for i := range spans {
				span := ss.Spans().AppendEmpty()
				span.SetTraceID([16]byte{byte(r + 1), byte(s), byte(i)})
				span.SetSpanID([8]byte{byte(r + 1), byte(s), byte(i)})
				span.SetName("operation")
			}
		}
	}
	return td
}

// forwardedLogs is n log records of one scope.
func forwardedLogs(n int) plog.Logs {
	ld := plog.NewLogs()
	records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range n {
		records.AppendEmpty().Body().SetStr(fmt.Sprint("record ", i))
	}
	return ld
}

// forwardedPoints is a gauge of n points.
func forwardedPoints(n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("queue_depth")
	points := m.SetEmptyGauge().DataPoints()
	for i := range n {
		points.AppendEmpty().SetDoubleValue(float64(i))
	}
	return md
}
