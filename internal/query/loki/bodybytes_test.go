package loki

import (
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// index/stats and index/volume count the bytes of a record's line as
// query_range answers it: a map or array body's is pdata's AsString
// (keys sorted, 2 for 2.0, 1e+21, <>& and U+2028 escaped), not the
// body's JSON as the table keeps it, which has another length.
func TestStructuredBodyBytesAreItsLokiLines(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "calc")
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	want := 0
	for i, fill := range []func(v pcommon.Value){
		func(v pcommon.Value) {
			m := v.SetEmptyMap()
			m.PutStr("msg", "a <b> & \u2028")
			m.PutDouble("n", 2)
			m.PutDouble("big", 1e21)
		},
		func(v pcommon.Value) {
			s := v.SetEmptySlice()
			s.AppendEmpty().SetDouble(3)
			s.AppendEmpty().SetDouble(4)
		},
		func(v pcommon.Value) { v.SetStr("plain") },
	} {
		lr := logs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(1+i) * time.Millisecond)))
		fill(lr.Body())
		want += len(lr.Body().AsString())
	}
	srv := serveLogs(t, ld)
	var stats struct{ Streams, Entries, Bytes int }
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/index/stats", window(`{service_name="calc"}`)), &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Entries != 3 || stats.Bytes != want {
		t.Errorf("index/stats %+v, want 3 entries of %d bytes", stats, want)
	}
	typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/index/volume", window(`{service_name="calc"}`)))
	if typ != "vector" || len(frames) != 1 || len(frames[0].values) != 1 || frames[0].values[0] != float64(want) {
		t.Errorf("index/volume %s %+v, want %d bytes", typ, frames, want)
	}
}
