package iceberg_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

func TestParseEventTime(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	for raw, want := range map[string]time.Time{
		`"2026-03-04T05:06:07.891Z"`:      at,
		`"2026-03-04T06:06:07.891+01:00"`: at,
		`1772600767`:                      at.Truncate(time.Second),
		`1772600767.891`:                  at,
		`1772600767891`:                   at,
		`1772600767891000`:                at,
		`1772600767891000000`:             at,
	} {
		if got, ok := iceberg.ParseEventTime([]byte(raw)); !ok || !got.Equal(want) {
			t.Errorf("%s: %v (%v), want %v", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`"yesterday"`, `null`, `{}`, `"1772600767"`, `1e400`} {
		if got, ok := iceberg.ParseEventTime([]byte(raw)); ok {
			t.Errorf("%s read as %v", raw, got)
		}
	}
}

// TestEventTimeOfInt64sMostNegative: int64's most negative number is
// nanoseconds by its size, as any number past 10^17 is (1677-09-21),
// not a magnitude overflowed to below 10^11 and read as seconds: a time
// 292 billion years off, whose microseconds (the event_time column,
// its day partition) wrapped.
func TestEventTimeOfInt64sMostNegative(t *testing.T) {
	want := time.Unix(0, math.MinInt64).UTC()
	if got, ok := iceberg.ParseEventTime([]byte("-9223372036854775808")); !ok || !got.Equal(want) {
		t.Errorf("-9223372036854775808: %v (%v), want %v", got, ok, want)
	}
}

// The raw table has Kafka's topic and timestamp as columns, and its rows
// are partitioned by the day of their event time: the value's field named
// by partition_by, else the record's timestamp. A backlog of old events
// lands in the days they belong to, not in the day it was loaded.
func TestKafkaColumnsAndEventDays(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "trace_raw", PartitionBy: "$.span.start"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	kafkaTime := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	values := []string{
		`{"span":{"start":"2026-01-02T03:04:05Z"}}`, // an RFC 3339 time
		`{"span":{"start":1767409445000}}`,          // epoch milliseconds: 2026-01-03
		`{"span":{}}`,                               // none: the Kafka timestamp
		`{"span":{"start":"soon"}}`,                 // not a time: the Kafka timestamp
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces", Partition: 0}, First: 0, Last: int64(len(values) - 1), Records: int64(len(values))}}}
	for i, v := range values {
		b.Records = append(b.Records, sink.Record{Record: &kgo.Record{Topic: "traces", Offset: int64(i), Value: []byte(v), Timestamp: kafkaTime}, ID: [16]byte{byte(i)}})
	}
	load(t, s, b)

	wantEvent := []time.Time{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 3, 3, 4, 5, 0, time.UTC), kafkaTime, kafkaTime}
	rows := 0
	scanRaw(t, s, func(rec arrow.RecordBatch) {
		off, topic := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		stamp, event := rec.Column(2).(*array.Timestamp), rec.Column(3).(*array.Timestamp)
		for i := range int(rec.NumRows()) {
			o := off.Value(i)
			gotStamp, gotEvent := stamp.Value(i).ToTime(arrow.Microsecond), event.Value(i).ToTime(arrow.Microsecond)
			if topic.Value(i) != "traces" || !gotStamp.Equal(kafkaTime) || !gotEvent.Equal(wantEvent[o]) {
				t.Errorf("offset %d: ktopic %q, ktimestamp %v, event_time %v; want traces, %v, %v", o, topic.Value(i), gotStamp, gotEvent, kafkaTime, wantEvent[o])
			}
			rows++
		}
	}, "koffset", "ktopic", "ktimestamp", "event_time")
	if rows != len(values) {
		t.Errorf("%d rows, want %d", rows, len(values))
	}
	files, err := s.DataFiles(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	days := map[string]int64{}
	for _, f := range files {
		for _, v := range f.Partition() {
			days[time.Unix(int64(v.(iceberggo.Date))*86400, 0).UTC().Format(time.DateOnly)] += f.Count()
		}
	}
	if want := map[string]int64{"2026-01-02": 1, "2026-01-03": 1, "2026-11-30": 2}; len(days) != len(want) || days["2026-01-02"] != 1 || days["2026-01-03"] != 1 || days["2026-11-30"] != 2 {
		t.Errorf("rows per partition day %v, want %v", days, want)
	}
}

// A raw table created before the Kafka columns gets them added at start
// (its older rows read null there) and keeps its partitioning by the day
// rows were added; loads go on into it.
func TestOldRawTableGetsTheKafkaColumns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.CreateLegacyRaw(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("start on an old table: %v", err)
	}
	load(t, s, batch(0, 0, 9))
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"ktopic", "ktimestamp", "event_time"} {
		if f, ok := tbl.Schema().FindFieldByName(col); !ok || f.Required {
			t.Errorf("column %s: %+v (found %v), want an optional column", col, f, ok)
		}
	}
	if spec := tbl.Spec(); spec.NumFields() != 1 || spec.Field(0).Name != "add_day" {
		t.Errorf("partition spec %v, want the table's own add_day", spec)
	}
	n := 0
	scanRaw(t, s, func(rec arrow.RecordBatch) {
		for i := range int(rec.NumRows()) {
			if v := rec.Column(0).(*array.String).Value(i); v != "traces" {
				t.Errorf("ktopic %q", v)
			}
			n++
		}
	}, "ktopic")
	if n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
	if err := openSink(t, dir, false).Prepare(ctx); err != nil {
		t.Errorf("second start: %v", err)
	}
}
