package otel

import (
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

// RowsOver must say "over" for every message a loader's decoder of the
// same limit dead-letters, and only measure the rows when its bound says
// they may be: the bound is never below the rows. Checked on the messages
// whose rows are largest for their protobuf size: items and elements
// (events, links, exemplars, quantiles, array values) sent empty, which
// take two bytes in protobuf and a row's or an element's every field in
// the rows, control characters (six bytes each in JSON), and texts every
// row repeats (a resource's and a scope's attributes, a metric's
// description).
func TestRowsOverBoundsTheRowsLoadersMeasure(t *testing.T) {
	const topic, tenant = "otlp_spans", "team-a"
	ctrl := strings.Repeat("\x01", 300)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("labels", strings.Repeat("l", 4<<10))
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().Attributes().PutStr("ctrl", ctrl)
	for i := range 300 {
		s := ss.Spans().AppendEmpty()
		if i%2 == 0 {
			for range 20 {
				s.Events().AppendEmpty()
				s.Links().AppendEmpty()
			}
			s.SetName(ctrl)
			empty := s.Attributes().PutEmptySlice("empty")
			for range 50 {
				empty.AppendEmpty()
			}
		}
	}
	ld := plog.NewLogs()
	records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := range 500 {
		r := records.AppendEmpty()
		if i%2 == 0 {
			arr := r.Body().SetEmptySlice()
			for range 40 {
				arr.AppendEmpty()
			}
		}
	}
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetDescription(strings.Repeat("d", 2<<10))
	for range 100 {
		p := g.SetEmptyGauge().DataPoints().AppendEmpty()
		for range 10 {
			p.Exemplars().AppendEmpty()
		}
	}
	sum := ms.AppendEmpty().SetEmptySum().DataPoints()
	hist := ms.AppendEmpty().SetEmptyHistogram().DataPoints()
	exp := ms.AppendEmpty().SetEmptyExponentialHistogram().DataPoints()
	summary := ms.AppendEmpty().SetEmptySummary().DataPoints()
	for range 100 {
		sum.AppendEmpty()
		hist.AppendEmpty().BucketCounts().FromRaw(make([]uint64, 30))
		exp.AppendEmpty()
		q := summary.AppendEmpty().QuantileValues()
		for range 10 {
			q.AppendEmpty()
		}
	}
	traces, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	must(t, err)
	logs, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	must(t, err)
	metrics, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	must(t, err)

	for _, c := range []struct {
		signal string
		data   any
		proto  []byte
	}{{SignalTraces, td, traces}, {SignalLogs, ld, logs}, {SignalMetrics, md, metrics}} {
		d, err := NewDecoder(c.signal, EncodingProto, Tenancy{Header: "tenant", Default: "default"})
		must(t, err)
		var b sink.Batch
		if _, err := d.AppendRows(&b, &kgo.Record{Topic: topic, Offset: 123456, Value: c.proto,
			Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(tenant)}}}); err != nil {
			t.Fatal(err)
		}
		loaded := len(b.Rows)
		src := source{topic: topic, partition: 1<<31 - 1, offset: 1<<63 - 1, tenant: tenant}
		frags := newFragments()
		src.coordinates = frags.coordinates(src)
		bound, err := rowsBound(c.data, len(c.proto), src, frags)
		must(t, err)
		w := row{measuring: true}
		measureRows(&w, c.data, src, frags)
		frags.release()
		t.Logf("%s: %d bytes of protobuf, %d of rows loaded, %d measured, bound %d", c.signal, len(c.proto), loaded, w.measured, bound)
		if w.measured < loaded || bound < w.measured {
			t.Errorf("%s: rows loaded %d, measured %d, bound %d: want loaded <= measured <= bound", c.signal, loaded, w.measured, bound)
		}
		// A loader of a limit one byte short dead-letters it: over.
		if over, err := RowsOver(c.data, len(c.proto), topic, tenant, loaded-1); err != nil || !over {
			t.Errorf("%s: rows of %d bytes, limit %d: over %v, %v", c.signal, loaded, loaded-1, over, err)
		}
		if over, err := RowsOver(c.data, len(c.proto), topic, tenant, w.measured); err != nil || over {
			t.Errorf("%s: rows of %d bytes measured, limit %d: over %v, %v", c.signal, w.measured, w.measured, over, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
