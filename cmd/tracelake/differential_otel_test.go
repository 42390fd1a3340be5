package main

import (
	"context"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// nastyMetrics are points of every metric type with the values a sink is
// most likely to store differently: int64's and uint64's edges, empty and
// odd histograms, NaN and infinities where they are JSON (bounds,
// quantiles, exemplars), exemplars of both value types with and without
// ids, the no-recorded-value flag, times in 1970. A NaN or infinite
// DOUBLE column (value, sum, min, max) is a row Databend rejects to the
// dead-letter table (README, "OpenTelemetry from Kafka"), so none here.
func nastyMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc ✓")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("scope")
	ts := pcommon.Timestamp(1_764_633_600_123_456_789)

	g := sm.Metrics().AppendEmpty()
	g.SetName("gauge")
	g.SetUnit("1")
	gauge := g.SetEmptyGauge()
	for i, v := range []float64{5e-324, math.MaxFloat64, -1.25} {
		p := gauge.DataPoints().AppendEmpty()
		p.SetTimestamp(ts + pcommon.Timestamp(i))
		p.SetDoubleValue(v)
		p.Attributes().PutInt("i", int64(i))
	}
	for i, v := range []int64{math.MaxInt64, math.MinInt64, 0} {
		p := gauge.DataPoints().AppendEmpty()
		p.SetTimestamp(pcommon.Timestamp(i)) // 1970
		p.SetIntValue(v)
		p.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(i == 2))
		e := p.Exemplars().AppendEmpty()
		e.SetIntValue(v)
		e.SetTimestamp(ts)
		if i == 0 {
			e.SetTraceID(pcommon.TraceID{1, 2, 3})
			e.SetSpanID(pcommon.SpanID{4, 5})
			e.FilteredAttributes().PutStr("k", "v")
		}
	}

	for _, mono := range []bool{true, false} {
		m := sm.Metrics().AppendEmpty()
		m.SetName("sum")
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(mono)
		if mono {
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		} else {
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		}
		p := sum.DataPoints().AppendEmpty()
		p.SetStartTimestamp(ts - 1_000)
		p.SetTimestamp(ts)
		p.SetDoubleValue(-1.5)
		e := p.Exemplars().AppendEmpty()
		e.SetDoubleValue(math.NaN())
	}

	h := sm.Metrics().AppendEmpty()
	h.SetName("histogram")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	p := hist.DataPoints().AppendEmpty()
	p.SetTimestamp(ts)
	p.SetCount(math.MaxUint64)
	p.SetSum(1e-300)
	p.SetMin(-2)
	p.SetMax(3)
	p.ExplicitBounds().FromRaw([]float64{math.Inf(-1), 0, 1.5, math.Inf(1)})
	p.BucketCounts().FromRaw([]uint64{0, math.MaxUint64, 1, 2, 3})
	hist.DataPoints().AppendEmpty().SetTimestamp(ts) // no buckets, no sum

	eh := sm.Metrics().AppendEmpty()
	eh.SetName("exponential")
	exp := eh.SetEmptyExponentialHistogram()
	exp.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := exp.DataPoints().AppendEmpty()
	ep.SetTimestamp(ts)
	ep.SetScale(-2)
	ep.SetZeroCount(7)
	ep.SetZeroThreshold(1e-300)
	ep.SetCount(20)
	ep.SetSum(-3.25)
	ep.Positive().SetOffset(-5)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 0, 2})
	ep.Negative().SetOffset(math.MaxInt32)
	ep.Negative().BucketCounts().FromRaw([]uint64{10})
	ep2 := exp.DataPoints().AppendEmpty()
	ep2.SetTimestamp(ts)
	ep2.SetScale(20)

	s := sm.Metrics().AppendEmpty()
	s.SetName("summary")
	sp := s.SetEmptySummary().DataPoints().AppendEmpty()
	sp.SetTimestamp(ts)
	sp.SetCount(3)
	sp.SetSum(0.1)
	for _, q := range [][2]float64{{0, math.Inf(-1)}, {0.5, 1}, {1, math.NaN()}} {
		v := sp.QuantileValues().AppendEmpty()
		v.SetQuantile(q[0])
		v.SetValue(q[1])
	}
	s.SetEmptySummary() // an empty summary after it: no points
	return md
}

// nastyLogs are log records with a body of every OTLP type, no times or
// times in 1970, every severity edge and ids all zero.
func nastyLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "svc")
	sl := rl.ScopeLogs().AppendEmpty()
	add := func() plog.LogRecord {
		r := sl.LogRecords().AppendEmpty()
		r.SetTimestamp(1_764_633_600_123_456_789)
		return r
	}
	add().Body().SetStr("text \x00 ✓ \"q\" \\")
	add().Body().SetInt(math.MinInt64)
	add().Body().SetDouble(math.NaN())
	add().Body().SetBool(false)
	add().Body().SetEmptyBytes().FromRaw([]byte{0, 0xff})
	m := add().Body().SetEmptyMap()
	m.PutStr("b", "2")
	m.PutInt("a", 1)
	m.PutEmptySlice("l").AppendEmpty().SetDouble(math.Inf(1))
	add() // an empty body
	r := add()
	r.SetTimestamp(0)
	r.SetObservedTimestamp(1)
	r.SetSeverityNumber(plog.SeverityNumber(255))
	r.SetSeverityText("WEIRD")
	r.SetFlags(plog.LogRecordFlags(0xffffffff))
	r.SetTraceID(pcommon.TraceID{})
	r.SetEventName("event ✓")
	r.Attributes().PutDouble("inf", math.Inf(-1))
	return ld
}

// The same OTLP metrics, of every type, stored on DuckDB, Databend and
// Iceberg give the same otel_metrics rows.
func TestSinksStoreTheSameOTLPMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline three times")
	}
	cluster, prod := startKafka(t, 1)
	value, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(nastyMetrics())
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sameRowsOnSinks(t, cluster.ListenAddrs()[0], "metrics", []string{"otel_metrics"})
}

// The same OTLP log records stored on DuckDB, Databend and Iceberg give
// the same otel_logs rows.
func TestSinksStoreTheSameOTLPLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline three times")
	}
	cluster, prod := startKafka(t, 1)
	value, err := (&plog.ProtoMarshaler{}).MarshalLogs(nastyLogs())
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sameRowsOnSinks(t, cluster.ListenAddrs()[0], "logs", []string{"otel_logs"})
}
