package loki

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// A record's observed time is answered to the nanosecond, as Loki's
// OTLP ingestion keeps it (pkg/loghttp/push/otlplabels/labels.go,
// otlp.go timestampFromLogRecord): a record without a time (what the
// Collector's filelog receiver sends when it parses no timestamp: the
// observed time its clock read, nanoseconds included) is at its observed
// nanosecond, and a record with both has its observed time as the
// structured metadata observed_timestamp (Unix ns).
func TestObservedTimeToTheNanosecond(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "tail")
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	observed := pcommon.NewTimestampFromTime(t0.Add(2e9 + 123))
	lr := logs.AppendEmpty()
	lr.SetObservedTimestamp(observed)
	lr.Body().SetStr("observed only")
	lr = logs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(1e9 + 7)))
	lr.SetObservedTimestamp(observed + 1000)
	lr.Body().SetStr("both")
	srv := serveLogs(t, ld)

	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="tail"}`, "direction", "forward")))
	if len(frames) != 1 {
		t.Fatalf("frames %+v, want one stream", frames)
	}
	f := frames[0]
	want := []string{strconv.FormatInt(t0.Add(1e9+7).UnixNano(), 10), strconv.FormatInt(int64(observed), 10)}
	if !slices.Equal(f.lines, []string{"both", "observed only"}) || !slices.Equal(f.ts, want) {
		t.Errorf("lines %q at %q, want [both observed only] at %q", f.lines, f.ts, want)
	}
	for i, line := range f.lines {
		wantMeta := ""
		if line == "both" {
			wantMeta = strconv.FormatUint(uint64(observed+1000), 10)
		}
		if got := f.labels[i]["observed_timestamp"]; got != wantMeta {
			t.Errorf("%q: observed_timestamp %q, want %q", line, got, wantMeta)
		}
	}
}

// TestRetryAcrossTheObservedUpgradeIsOneRecord: records loaded once
// before observed_time_unix_nano existed (the column null: their
// observed time is the microsecond column's) and again after (a
// client's retry across the upgrade) are each one record, answered with
// the exact observed time: the record without a time at its observed
// nanosecond, the record with both with its exact observed_timestamp.
func TestRetryAcrossTheObservedUpgradeIsOneRecord(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "tail")
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	observed := pcommon.NewTimestampFromTime(t0.Add(2e9 + 123))
	logs.AppendEmpty().SetObservedTimestamp(observed)
	lr := logs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(1e9)))
	lr.SetObservedTimestamp(observed + 1000)
	value, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	l := newLake(t)
	l.load(t, []string{"a", "a"}, [][]byte{value, value})
	res, err := l.sink.DB().ExecContext(context.Background(),
		`UPDATE otel_logs SET observed_time_unix_nano = NULL WHERE koffset = (SELECT min(koffset) FROM otel_logs)`)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 2 {
		t.Fatalf("the first copy's rows made older: %d, %v; want 2", n, err)
	}
	srv := serveLake(t, l)
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="tail"}`, "direction", "forward")))
	if len(frames) != 1 {
		t.Fatalf("frames %+v, want one stream", frames)
	}
	f := frames[0]
	want := []string{strconv.FormatInt(t0.Add(1e9).UnixNano(), 10), strconv.FormatInt(int64(observed), 10)}
	if !slices.Equal(f.ts, want) {
		t.Fatalf("entries at %q, want each record once, at %q", f.ts, want)
	}
	if got, w := f.labels[0]["observed_timestamp"], strconv.FormatUint(uint64(observed+1000), 10); got != w {
		t.Errorf("observed_timestamp %q, want %q", got, w)
	}
}
