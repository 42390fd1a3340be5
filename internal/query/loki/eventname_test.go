package loki

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// A record's event_name is structured metadata, as Loki's OTLP ingestion
// makes it (pkg/loghttp/push/otlplabels/labels.go LogAttrsToLabels:
// event_name when not empty; a record attribute of that name is left
// out then, "the first-class field takes precedence"), and a label
// filter finds the event by it.
func TestEventNameIsStructuredMetadata(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "shop")
	logs := rl.ScopeLogs().AppendEmpty().LogRecords()
	lr := logs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(1)))
	lr.SetEventName("order.paid")
	lr.Attributes().PutStr("event_name", "shadowed")
	lr.Body().SetStr("paid")
	lr = logs.AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(2)))
	lr.Attributes().PutStr("event_name", "from-attribute")
	lr.Body().SetStr("plain")
	srv := serveLogs(t, ld)

	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="shop"}`, "direction", "forward")))
	if len(frames) != 1 || len(frames[0].labels) != 2 {
		t.Fatalf("frames %+v, want one stream of two entries", frames)
	}
	want := map[string]string{"paid": "order.paid", "plain": "from-attribute"}
	for i, line := range frames[0].lines {
		if got := frames[0].labels[i]["event_name"]; got != want[line] {
			t.Errorf("entry %q: event_name %q, want %q", line, got, want[line])
		}
	}
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="shop"} | event_name="order.paid"`)))
	if len(frames) != 1 || len(frames[0].lines) != 1 || frames[0].lines[0] != "paid" {
		t.Errorf(`| event_name="order.paid": %+v, want the paid event`, frames)
	}
}
