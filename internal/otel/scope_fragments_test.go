package otel

import (
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/sink"
)

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A scope's fragment copies its resource's attributes. Written for every
// scope, even one of no span (a few bytes of protobuf), and kept to the
// message's end, 64 KiB of resource attributes over 2,000 empty scopes
// (74 KB of protobuf) took 128 MB of fragments for one row: an 8 MiB
// request of them, terabytes, so a loader died at every attempt to
// read the message, and since RowsOver (which also wrote each scope's
// fragment, empty or not, to bound the rows) a forward-mode receiver at
// the request. The fragments a message holds at once are a resource's and
// one scope's, and a bound adds lengths.
func TestScopesOfNoRowCostNoFragments(t *testing.T) {
	const scopes, limit = 2000, 256 << 20
	attrs := strings.Repeat("x", 64<<10)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("labels", attrs)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("labels", attrs)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("labels", attrs)
	for range scopes {
		rs.ScopeSpans().AppendEmpty()
		rl.ScopeLogs().AppendEmpty()
		rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge() // a metric of no point
	}
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("one")
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("one")
	rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	// A span in each of as many scopes: rows of 128 MB, within the
	// limit, which the bound need not write to add up.
	spread := ptrace.NewTraces()
	srs := spread.ResourceSpans().AppendEmpty()
	srs.Resource().Attributes().PutStr("labels", attrs)
	for range scopes {
		srs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	}
	traces, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	must(t, err)
	logs, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	must(t, err)
	metrics, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	must(t, err)
	spreadProto, err := ptraceotlp.NewExportRequestFromTraces(spread).MarshalProto()
	must(t, err)

	const most = 16 << 20 // the row is 66 KB; the message, 74 to 82 KB
	for _, c := range []struct {
		signal string
		data   any
		proto  []byte
	}{{SignalTraces, td, traces}, {SignalLogs, ld, logs}, {SignalMetrics, md, metrics}} {
		d, err := NewDecoder(c.signal, EncodingProto, Tenancy{Header: "tenant", Default: "default"})
		must(t, err)
		d.WithMaxRowBytes(limit)
		var b sink.Batch
		var rows int
		if n := allocated(func() { rows, err = d.AppendRows(&b, &kgo.Record{Topic: "otlp", Value: c.proto}) }); err != nil || rows != 1 || n > most {
			t.Errorf("%s: %d bytes of protobuf, %d scopes of no row: loader's decode %d rows, %v, allocating %d MB (want at most %d)", c.signal, len(c.proto), scopes, rows, err, n>>20, most>>20)
		}
		var over bool
		if n := allocated(func() { over, err = RowsOver(c.data, len(c.proto), "otlp", "default", limit) }); err != nil || over || n > most {
			t.Errorf("%s: %d bytes of protobuf, %d scopes of no row: RowsOver %v, %v, allocating %d MB (want at most %d)", c.signal, len(c.proto), scopes, over, err, n>>20, most>>20)
		}
	}
	var over bool
	if n := allocated(func() { over, err = RowsOver(spread, len(spreadProto), "otlp", "default", limit) }); err != nil || over || n > most {
		t.Errorf("traces: a span in each of %d scopes, rows within the limit: RowsOver %v, %v, allocating %d MB (want at most %d)", scopes, over, err, n>>20, most>>20)
	}
}
