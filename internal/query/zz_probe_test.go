package query

import (
	"fmt"
	"testing"
)

func TestZZProbe(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	for _, q := range []string{
		`SELECT rowid, name FROM otel_spans`,
		`SELECT otel_spans.rowid FROM otel_spans`,
		`SELECT filename FROM otel_spans`,
		`SELECT file_row_number FROM otel_spans`,
		`SELECT max(duration_ms), typeof(sum(duration_ms)) FROM otel_spans`,
		`SELECT count(*) FROM otel_spans WHERE duration_ms > 98`,
		`SELECT rowid FROM genai_prices`,
	} {
		got, err := l.rows(t, tenantA, q)
		fmt.Printf("DUCK %s\n   %v %.150v\n", q, got, err)
		got, err = il.rows(t, tenantA, q)
		fmt.Printf("ICE  %s\n   %v %.150v\n", q, got, err)
	}
}
