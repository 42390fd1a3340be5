package loki

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Attribute names become structured metadata names as Loki's OTLP
// ingestion names them (pkg/loghttp/push/otlp.go attributeToLabels:
// otlptranslator.NormalizeLabel of the key, a nested map's key joined
// to its normalized parent's with _ first): each character that is no
// ASCII letter or digit is one _ (a rune, not a byte: "ação" is a__o),
// a name starting with a digit is prefixed key_, one starting with a
// single _ is prefixed key; a nested key is normalized joined, so a
// digit after its parent's _ stays ("m_1"). A selector's label filter
// finds the record by that name.
func TestAttributeNamesAsLokiNormalizesThem(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "names")
	rl.Resource().Attributes().PutStr("9zone", "r")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(1)))
	lr.Body().SetStr("hello")
	if err := lr.Attributes().FromRaw(map[string]any{"1st": "a", "_private": "b", "ação": "c", "__dunder": "f",
		"m": map[string]any{"1": "d", "_x": "e"}}); err != nil {
		t.Fatal(err)
	}
	srv := serveLogs(t, ld)

	want := map[string]string{"key_9zone": "r", "key_1st": "a", "key_private": "b", "a__o": "c", "__dunder": "f", "m_1": "d", "m__x": "e"}
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="names"}`)))
	if len(frames) != 1 || len(frames[0].labels) != 1 {
		t.Fatalf("frames %+v, want one entry", frames)
	}
	got := frames[0].labels[0]
	for name, v := range want {
		if got[name] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", name, got[name], v, got)
		}
	}
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="names"} | key_1st="a" | m_1="d"`)))
	if len(frames) != 1 || len(frames[0].lines) != 1 {
		t.Errorf(`| key_1st="a" | m_1="d": %+v, want the record`, frames)
	}
}

// TestCollidingAttributeNamesAnswerTheLast: two attributes of a record
// whose names Loki normalizes alike ("a.b" and "a_b") are one
// structured metadata label, the value of the later in the record's
// order, as Loki's label builder sets each in turn (pkg/logql/log/
// labels.go LabelsBuilder.Set: a name set again takes the new value) —
// and the same on every read, not as a map's iteration order falls.
func TestCollidingAttributeNamesAnswerTheLast(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "names")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(1)))
	lr.Body().SetStr("hello")
	for _, k := range []string{"a.b", "a-b", "a_b", "z.y", "z_y"} {
		lr.Attributes().PutStr(k, "value of "+k)
	}
	srv := serveLogs(t, ld)
	for range 10 {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="names"}`)))
		if len(frames) != 1 || len(frames[0].labels) != 1 {
			t.Fatalf("frames %+v, want one entry", frames)
		}
		got := frames[0].labels[0]
		if got["a_b"] != "value of a_b" || got["z_y"] != "value of z_y" {
			t.Fatalf("a_b %q, z_y %q; want the later attributes' values", got["a_b"], got["z_y"])
		}
	}
}
