package pipeline_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A forwarded request is answered once Kafka holds it, and its loaders
// must then store it: the client is never told of what they do. Every
// span row repeats its resource's attributes, so a request of a few tens
// of KB (16 KiB of resource attributes over 1,500 spans) decodes to more
// rows than max_inflight_bytes, which every loader dead-letters whole
// (otel.Decoder.WithMaxRowBytes). The receivers, configured with the same
// max_inflight_bytes, answered it 200: acknowledged spans in no table,
// only the message in otel_spans_dlq, which `dlq replay` refuses (with
// the default 256 MiB, the same happens to 16,000 such spans). A request
// is either stored in its table or refused with an answer the client
// sees, which load mode gives (a partial success, all rejected).
func TestOTLPForwardAcknowledgesOnlyRowsItsLoadersTake(t *testing.T) {
	const budget = 16 << 20 // max_inflight_bytes of receivers and loader alike
	c := newCluster(t, 1)
	fwd, err := otlp.NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
		map[string]string{otel.SignalTraces: topic}, "X-Scope-OrgID", 8<<20, budget, testLog(t))
	must(t, err)
	defer fwd.Close()
	rcv, err := otlp.Start(otlp.Options{HTTP: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: budget,
		DefaultTenant: "default", Forward: fwd, Log: testLog(t)})
	must(t, err)
	defer rcv.Shutdown(context.Background())

	td := forwardedTraces(1, 1, 1500)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("k8s.pod.labels", strings.Repeat("x", 16<<10))
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	must(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+rcv.Addr["http"]+"/v1/traces", bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Scope-OrgID", "team-a")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("a request of %d bytes answered %s: %s", len(body), resp.Status, answer)

	cfg := testConfig(t, c)
	cfg.Kafka.Format, cfg.Kafka.Signal = config.FormatOTLPProto, otel.SignalTraces
	cfg.Sink.Table = otel.Spans.Name
	cfg.GenAI.Operations = "off"
	cfg.MaxInflightBytes = budget
	must(t, cfg.Validate())
	snk := openSinkWith(t, duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
		Typed: otel.TableOf(otel.SignalTraces), Log: testLog(t)})
	runUntilIdle(t, cfg, snk, nil)
	spans := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans WHERE tenant_id = 'team-a'")
	dlq := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans_dlq")
	switch {
	case resp.StatusCode == http.StatusOK && (spans != int64(td.SpanCount()) || dlq != 0):
		t.Errorf("acknowledged (200), the request's %d spans are stored %d in otel_spans, with %d dead letters", td.SpanCount(), spans, dlq)
	case resp.StatusCode != http.StatusOK && resp.StatusCode/100 != 4:
		t.Errorf("answered %s, which the client retries: every retry is refused by the same loaders", resp.Status)
	case resp.StatusCode != http.StatusOK && spans+dlq != 0:
		t.Errorf("refused (%s), yet stored: %d spans, %d dead letters", resp.Status, spans, dlq)
	}
}
