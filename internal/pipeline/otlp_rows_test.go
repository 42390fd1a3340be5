package pipeline_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
)

// Every row of a resource repeats its attributes (resource_attributes), so
// a small OTLP message can decode to any multiple of its size: 16 KiB of
// resource attributes over 8,192 empty data points is a 33 KB message of
// 137 MB of rows (8,192 empty spans: 98 KB of 139 MB). A 1 MB Kafka message (or an 8 MiB
// request to a receiver in load mode) of that shape decoded to tens of
// gigabytes: the process ran out of memory on it at every restart and its
// partition never moved on. A message whose rows outgrow the process's
// max_inflight_bytes is dead-lettered with the reason instead, having
// decoded no more than that, and its neighbours load.
func TestOTLPMessageDecodingPastTheMemoryBudgetIsDeadLettered(t *testing.T) {
	const spans = 8192
	attr := strings.Repeat("r", 16<<10)
	traces := func() []byte {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("big", attr)
		ss := rs.ScopeSpans().AppendEmpty().Spans()
		for range spans {
			ss.AppendEmpty()
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		must(t, err)
		return b
	}
	logs := func() []byte {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("big", attr)
		lr := rl.ScopeLogs().AppendEmpty().LogRecords()
		for range spans {
			lr.AppendEmpty()
		}
		b, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
		must(t, err)
		return b
	}
	metrics := func() []byte {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("big", attr)
		dps := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
		for range spans {
			dps.AppendEmpty()
		}
		b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		must(t, err)
		return b
	}
	for signal, msg := range map[string]func() []byte{otel.SignalTraces: traces, otel.SignalLogs: logs, otel.SignalMetrics: metrics} {
		cfg := config.Default()
		cfg.Kafka.Signal = signal
		cfg.MaxInflightBytes = 32 << 20
		d, err := pipeline.OTLPDecoder(cfg, otel.EncodingProto, "", nil)
		must(t, err)
		value := msg()
		var b sink.Batch
		n, err := d.AppendRows(&b, &kgo.Record{Value: value})
		if err == nil || !strings.Contains(err.Error(), "max_inflight_bytes") {
			t.Errorf("%s: a %d-byte message decoded to %d rows of %d bytes (max_inflight_bytes %d), error %v; want it refused naming max_inflight_bytes",
				signal, len(value), n, len(b.Rows), cfg.MaxInflightBytes, err)
		}
		if len(b.Rows) != 0 || cap(b.Rows) > 2*int(cfg.MaxInflightBytes) {
			t.Errorf("%s: the refused message left %d bytes of rows in the batch, having grown it to %d", signal, len(b.Rows), cap(b.Rows))
		}
		if errors.Is(err, sink.ErrTransient) {
			t.Errorf("%s: refused as transient, so read again for ever: %v", signal, err)
		}
	}
}
