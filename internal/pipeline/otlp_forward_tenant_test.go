package pipeline_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A forwarded request always names its tenant, in the forwarding
// process's tenancy.kafka_header. A loader of that topic whose
// tenancy.kafka_header is another header (or "", none) found no tenant in
// it and stored the request's spans under tenancy.default: team-a's spans
// readable as the default tenant's, verify silent. A request's rows carry
// its tenant, or do not reach the table.
func TestOTLPForwardedRowsNeverTakeTheDefaultTenant(t *testing.T) {
	c := newCluster(t, 1)
	fwd, err := otlp.NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
		map[string]string{otel.SignalTraces: topic}, "X-Scope-OrgID", 8<<20, 64<<20, testLog(t))
	must(t, err)
	defer fwd.Close()
	td := forwardedTraces(1, 1, 3)
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	must(t, err)
	if _, err := fwd.Forward(t.Context(), otel.SignalTraces, "team-a", body); err != nil {
		t.Fatal(err)
	}
	for i, header := range []string{"tenant", ""} {
		cfg := testConfig(t, c)
		cfg.Kafka.Format, cfg.Kafka.Signal = config.FormatOTLPProto, otel.SignalTraces
		cfg.Kafka.Group = "loader-" + header
		cfg.Sink.Table = otel.Spans.Name
		cfg.GenAI.Operations = "off"
		cfg.Tenancy.KafkaHeader = header
		must(t, cfg.Validate())
		snk := openSinkWith(t, duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
			Typed: otel.TableOf(otel.SignalTraces), Log: testLog(t)})
		runUntilIdle(t, cfg, snk, nil)
		if other := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans WHERE tenant_id <> 'team-a'"); other != 0 {
			t.Errorf("loader %d, tenancy.kafka_header %q: %d of team-a's %d spans stored under another tenant", i, header, other, td.SpanCount())
		}
		// Not lost either: the message waits in the dead-letter table
		// with the reason, which names the setting to fix.
		if dlq := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans_dlq WHERE error LIKE '%tenancy.kafka_header%'"); dlq != 1 {
			t.Errorf("loader %d, tenancy.kafka_header %q: %d dead letters naming tenancy.kafka_header, want the request's message", i, header, dlq)
		}
	}
}
