package loki

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// A record without a severity has the level its line states, and a map
// body's line is its AsString, each map's keys sorted: Loki's distributor
// takes the first level field it meets in that line (pkg/distributor/
// field_detection.go getLevelUsingJSONParser: jsonparser.ObjectEach,
// depth first), not the first in the order the body was sent.
func TestStructuredBodyLevelIsItsLokiLines(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "calc")
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, fill := range []func(m pcommon.Map){
		// {"level":"info","severity":"error"}: info.
		func(m pcommon.Map) { m.PutStr("severity", "error"); m.PutStr("level", "info") },
		// {"a":{"lvl":"debug"},"level":"warn"}: debug, the nested map first.
		func(m pcommon.Map) { m.PutStr("level", "warn"); m.PutEmptyMap("a").PutStr("lvl", "debug") },
		// Two levels deep only, Loki's default (log_level_from_json_max_depth):
		// {"b":{"c":{"level":"error"}},"x/~y":{"lvl":"warn"}} is warn.
		func(m pcommon.Map) {
			m.PutEmptyMap("x/~y").PutStr("lvl", "warn")
			m.PutEmptyMap("b").PutEmptyMap("c").PutStr("level", "error")
		},
	} {
		lr := logs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(1+i) * time.Millisecond)))
		fill(lr.Body().SetEmptyMap())
	}
	srv := serveLogs(t, ld)
	var got []string
	for _, level := range []string{"info", "error", "debug", "warn"} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="calc", detected_level="`+level+`"}`, "direction", "forward")))
		for _, f := range frames {
			for _, l := range f.lines {
				got = append(got, level+" "+l)
			}
		}
	}
	want := []string{`info {"level":"info","severity":"error"}`, `debug {"a":{"lvl":"debug"},"level":"warn"}`, `warn {"b":{"c":{"level":"error"}},"x/~y":{"lvl":"warn"}}`}
	if !slices.Equal(got, want) {
		t.Errorf("levels\n got  %q\n want %q", got, want)
	}
}
