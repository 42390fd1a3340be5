package duckdb

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Transform mode casts a field as a model's merge does (sqltext.TryCast),
// whatever the session's time zone: into TIMESTAMPTZ a text without an
// offset is UTC, one with an offset (seconds too) that instant; into a
// zoneless column of any spelling the instant in UTC. DuckDB's own casts
// read the first in the session's zone and drop the offset of the others.
func TestTransformReadsTimestampZonesAsMergesDo(t *testing.T) {
	texts := []string{"2024-01-01T10:00:00", "2024-01-01T10:00:00+02:00", "1900-01-01T10:00:00+05:21:10"}
	var vals, want []string
	for i, s := range texts {
		vals = append(vals, fmt.Sprintf(`{"id":%d,"tz":%q,"dt":%q}`, i, s, s))
		at, err := parseAny(s, time.RFC3339, "2006-01-02T15:04:05-07:00:00", "2006-01-02T15:04:05")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d|%d,%d", i, at.Unix(), at.UnixMilli()))
	}
	rows, dlq := loadTransformed(t, `SET GLOBAL TimeZone = 'Asia/Kolkata'; CREATE TABLE orders (id BIGINT, tz TIMESTAMPTZ, dt DATETIME(3))`,
		`SELECT id, epoch(tz)::BIGINT || ',' || epoch_ms(dt) FROM orders ORDER BY id`, vals...)
	if !slices.Equal(rows, want) {
		t.Errorf("orders (id|tz s,dt ms) = %v, want %v; dead letters: %v", rows, want, dlq)
	}
}

// parseAny is the instant s names in the first layout that reads it
// (UTC without a zone).
func parseAny(s string, layouts ...string) (time.Time, error) {
	var errs []error
	for _, l := range layouts {
		at, err := time.Parse(l, s)
		if err == nil {
			return at, nil
		}
		errs = append(errs, err)
	}
	return time.Time{}, errors.Join(errs...)
}
