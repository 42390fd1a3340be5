package duckdb

import (
	"slices"
	"testing"
)

// A field that drifts to a number past its column's floating type
// (1e400 into a DOUBLE, 1e39 into a FLOAT) was stored as infinity: DuckDB's
// cast of the field's text overflows without an error, so the row held
// another value than sent (and Databend's COPY, whose JSON parser refuses
// 1e400, dead-letters it). Such an object is a field that does not cast,
// as a fraction into an integer column is; the text "inf" or "-Infinity",
// which is DuckDB's own spelling of infinity, still loads as infinity, and
// a number in range loads.
func TestTransformNumberPastAFloatingTypeIsDeadLettered(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, d DOUBLE, f FLOAT)`,
		`SELECT id, coalesce(d::VARCHAR, '') || '/' || coalesce(f::VARCHAR, '') FROM orders`,
		`{"id": 1, "d": 1e308, "f": 3e38}`,
		`{"id": 2, "d": 1e400}`,
		`{"id": 3, "d": -1e400}`,
		`{"id": 4, "f": 1e39}`,
		`{"id": 5, "d": "1e400"}`,
		`{"id": 6, "d": "inf", "f": "-Infinity"}`,
		`{"id": 7, "d": 1e-400}`,
	)
	if want := []string{"1|1e+308/3e+38", "6|inf/-inf", "7|0.0/"}; !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
	var offsets []string
	for _, d := range dlq {
		offsets = append(offsets, d[:1])
	}
	if want := []string{"1", "2", "3", "4"}; !slices.Equal(offsets, want) {
		t.Errorf("dead letters %q, want offsets %q", dlq, want)
	}
}
