package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/verify"
)

// A forwarded request always names its tenant, in the forwarding
// process's tenancy.kafka_header. A loader of that topic whose
// tenancy.kafka_header is another header (or "", none) found no tenant in
// it and stored the request's spans under tenancy.default: team-a's spans
// readable as the default tenant's, verify silent. Then (33ea96f) it
// dead-lettered them, lost for good: the ledger covers their offsets, so
// the loader fixed never read them again, and `dlq replay` refuses the
// OpenTelemetry tables (it has no decoder). It is a setting to fix, not a
// bad message: the request waits in Kafka (its partition read again from
// it, logged with the reason) and loads under its tenant once the
// setting is fixed.
func TestOTLPForwardedRowsWaitForTheLoadersTenantHeader(t *testing.T) {
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
	cfg := testConfig(t, c)
	cfg.Kafka.Format, cfg.Kafka.Signal = config.FormatOTLPProto, otel.SignalTraces
	cfg.Sink.Table = otel.Spans.Name
	cfg.GenAI.Operations = "off"
	snk := openSinkWith(t, duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
		Typed: otel.TableOf(otel.SignalTraces), Log: testLog(t)})
	for _, header := range []string{"tenant", ""} { // not the forwarder's
		cfg.Tenancy.KafkaHeader = header
		must(t, cfg.Validate())
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := pipeline.Run(ctx, context.Background(), cfg, snk, pipeline.RunOptions{
			ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t)})
		cancel()
		must(t, err)
		if n := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans"); n != 0 {
			t.Errorf("loader of tenancy.kafka_header %q: %d spans stored, want none", header, n)
		}
		if n := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans_dlq"); n != 0 {
			t.Errorf("loader of tenancy.kafka_header %q: %d dead letters, want none", header, n)
		}
	}
	cfg.Tenancy.KafkaHeader = "x-scope-orgid" // fixed (the case of a header name is not its own)
	must(t, cfg.Validate())
	runUntilIdle(t, cfg, snk, nil)
	if n := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans WHERE tenant_id = 'team-a'"); n != int64(td.SpanCount()) {
		t.Errorf("loader fixed: %d of team-a's %d spans stored under team-a", n, td.SpanCount())
	}
	if n := queryInt(t, snk.DB(), "SELECT count(*) FROM otel_spans_dlq"); n != 0 {
		t.Errorf("%d dead letters, want none: the request waited for the setting", n)
	}
	if rep := verified(t, cfg, snk); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
}

// verified is verify's report on snk, an OpenTelemetry table's sink.
func verified(t *testing.T, cfg *config.Config, snk *duckdb.Sink) *verify.Report {
	t.Helper()
	tn := snk.Tables()
	rep, err := verify.Run(context.Background(), verify.SQLQuerier{DB: snk.DB()},
		verify.Tables{Main: tn.Main, DLQ: tn.DLQ, Ledger: tn.Ledger, Topic: duckdb.TopicExpr}, watermarksOf(t, cfg), true)
	must(t, err)
	return rep
}
