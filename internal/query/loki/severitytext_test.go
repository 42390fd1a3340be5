package loki

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// TestSeverityTextNamingALevelWinsOverTheNumber: Loki's distributor
// takes the level from a record's structured metadata before its
// severity number (pkg/distributor/field_detection.go extractLogLevel:
// labelsContainAny(structuredMetadata, DefaultAllowedLevelFields), whose
// severity_text the OTLP ingestion always writes, then
// detectLogLevelFromLogEntry), normalized (normalizeLogLevel).
// OpenTelemetry Python's logging handler sends a CRITICAL record as
// severity_text "CRITICAL", severity_number FATAL (21): Loki's level is
// critical; it was answered fatal here, from the number, and
// detected_level="critical" found none of Python's critical records. A
// text that names no level gives way to the number (a difference kept
// on purpose: Loki makes the text itself the level).
func TestSeverityTextNamingALevelWinsOverTheNumber(t *testing.T) {
	want := map[string]string{
		"python critical": "critical", // CRITICAL, FATAL
		"text warn":       "warn",     // WARN, ERROR: the text's
		"dotnet info":     "info",     // Information, INFO
		"syslog notice":   "info",     // notice names no level: INFO's
		"no text":         "error",    // ERROR's
	}
	severities := map[string]struct {
		n    plog.SeverityNumber
		text string
	}{
		"python critical": {plog.SeverityNumberFatal, "CRITICAL"},
		"text warn":       {plog.SeverityNumberError, "WARN"},
		"dotnet info":     {plog.SeverityNumberInfo, "Information"},
		"syslog notice":   {plog.SeverityNumberInfo2, "notice"},
		"no text":         {plog.SeverityNumberError, ""},
	}
	var records []record
	at := time.Second
	for line, s := range severities {
		records = append(records, record{tenant: "a", resource: map[string]string{"service.name": "app"}, at: at, body: line, severity: s.n, text: s.text})
		at += time.Second
	}
	srv := serverOf(t, records)
	got := map[string]string{}
	for _, level := range []string{"trace", "debug", "info", "warn", "error", "critical", "fatal", "unknown"} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="app", detected_level="`+level+`"}`)))
		for _, f := range frames {
			for _, line := range f.lines {
				got[line] = level
			}
		}
	}
	for line, level := range want {
		if got[line] != level {
			t.Errorf("%q: detected_level %q, want %q", line, got[line], level)
		}
	}
}
