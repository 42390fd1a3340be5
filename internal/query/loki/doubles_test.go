package loki

import (
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Double attributes and bodies are answered as Loki's OTLP ingestion
// writes them, pdata's AsString (pkg/loghttp/push/otlp.go Body().AsString(),
// otlplabels/labels.go AttributeToLabels): a whole double 2.0 as 2, 1e21
// as 1e+21, in a stream label (cloud.region, indexed), in structured
// metadata (resource and record attributes, arrays and maps of them),
// and in the line; a stream selector on the label matches it.
func TestDoublesAreAnsweredAsLokiWritesThem(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("service.name", "calc")
	res.PutDouble("cloud.region", 2)
	res.PutDouble("cpu", 4)
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	lr := logs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(1)))
	lr.Body().SetDouble(2)
	if err := lr.Attributes().FromRaw(map[string]any{"ratio": 2.0, "count": 2, "big": 1e21, "small": 1e-7, "half": 2.5,
		"ratios": []any{2.0, 3.0}, "kv": map[string]any{"d": 2.0}}); err != nil {
		t.Fatal(err)
	}
	lr = logs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(2)))
	lr.Body().SetDouble(1e21)
	srv := serveLogs(t, ld)

	for _, q := range []string{`{service_name="calc"}`, `{cloud_region="2"}`} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(q, "direction", "forward")))
		f := frames[0]
		if !slices.Equal(f.lines, []string{"2", "1e+21"}) {
			t.Errorf("%s: lines %q, want [2 1e+21]", q, f.lines)
		}
		if len(f.labels) == 0 {
			continue
		}
		for name, want := range map[string]string{"cloud_region": "2", "cpu": "4", "ratio": "2", "count": "2", "big": "1e+21",
			"small": "1e-7", "half": "2.5", "ratios": "[2,3]", "kv_d": "2"} {
			if got := f.labels[0][name]; got != want {
				t.Errorf("%s: label %s = %q, want %q", q, name, got, want)
			}
		}
	}
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="calc"} |= "e+21"`)))
	if f := frames[0]; !slices.Equal(f.lines, []string{"1e+21"}) {
		t.Errorf(`|= "e+21": lines %q, want [1e+21]`, f.lines)
	}
}
