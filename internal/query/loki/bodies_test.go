package loki

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// A map or array body is answered as the line Loki's OTLP ingestion
// writes for it, pdata's AsString (pkg/loghttp/push/otlp.go
// otlpLogToPushEntry: Line: log.Body().AsString()): JSON with each map's
// keys sorted, whole doubles without .0, an exponent with its +, U+2028
// escaped (encoding/json), not the body's JSON as the table keeps it (in
// the order received, 2.0). Line filters match that line, and a limit
// counts the lines they keep.
func TestStructuredBodiesAnsweredAsLokiWritesThem(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "calc")
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	var want []string // pdata's AsString of each body, in time order
	add := func(fill func(v pcommon.Value)) {
		lr := logs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(1+len(want)) * time.Millisecond)))
		fill(lr.Body())
		want = append(want, lr.Body().AsString())
	}
	add(func(v pcommon.Value) {
		m := v.SetEmptyMap()
		m.PutStr("msg", "paid <b> & \u2028")
		m.PutStr("level", "info")
		m.PutDouble("n", 2)
		m.PutEmptyBytes("raw").FromRaw([]byte{1})
		m.PutEmptyMap("z").PutDouble("big", 1e21)
	})
	add(func(v pcommon.Value) {
		s := v.SetEmptySlice()
		s.AppendEmpty().SetDouble(2)
		s.AppendEmpty().SetStr("a")
	})
	add(func(v pcommon.Value) { v.SetStr(`{"n":2.0}`) }) // a string is its line as it is
	add(func(v pcommon.Value) { v.SetEmptyMap().PutInt("n", 3) })
	srv := serveLogs(t, ld)

	lines := func(q string, more ...string) []string {
		t.Helper()
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(q, append([]string{"direction", "forward"}, more...)...)))
		var out []string
		for _, f := range frames {
			out = append(out, f.lines...)
		}
		return out
	}
	if got := lines(`{service_name="calc"}`); !slices.Equal(got, want) {
		t.Errorf("lines\n got  %q\n want %q", got, want)
	}
	// `"n":2}` is in the map's line and the array's is [2,"a"]; the
	// string body holds "n":2.0 and the last map "n":3.
	if got, w := lines(`{service_name="calc"} |= "\"n\":2,\"raw\"" or "[2,"`), []string{want[0], want[1]}; !slices.Equal(got, w) {
		t.Errorf("|= filter\n got  %q\n want %q", got, w)
	}
	if got, w := lines(`{service_name="calc"} != "2.0"`), []string{want[0], want[1], want[3]}; !slices.Equal(got, w) {
		t.Errorf("!= filter\n got  %q\n want %q", got, w)
	}
	// With a limit of 1, the first line the filter keeps (the array's),
	// not none because the map before it held "2.0" in the table.
	if got, w := lines(`{service_name="calc"} |~ "^\\[2,"`, "limit", "1"), []string{want[1]}; !slices.Equal(got, w) {
		t.Errorf("limit 1\n got  %q\n want %q", got, w)
	}
}
