package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// An hour is read in the forms the usage names, truncated to the hour in
// its offset, as the UTC hours it overlaps (an hour of a half-hour
// offset was truncated to one UTC hour, and answered ready while the
// second half of it was not); anything else is refused with the forms
// it takes.
func TestParseHour(t *testing.T) {
	utc := func(h int) time.Time { return time.Date(2026, 12, 4, h, 0, 0, 0, time.UTC) }
	for s, want := range map[string][]time.Time{
		"2026-12-04T10":             {utc(10)},
		"2026-12-04 10":             {utc(10)},
		"2026-12-04T10:59":          {utc(10)},
		"2026-12-04T11:30:00+01:00": {utc(10)},
		"2026-12-04T10:00:00+05:30": {utc(4), utc(5)},
		"2026-12-04T10:59:00+05:45": {utc(4), utc(5)},
	} {
		if got, err := parseHour(s); err != nil || !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("parseHour(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "10", "2026-12-04", "yesterday"} {
		if _, err := parseHour(s); err == nil || !strings.Contains(err.Error(), "want 2026-12-04T10 or RFC 3339") {
			t.Errorf("parseHour(%q): %v, want a refusal naming the forms", s, err)
		}
	}
}

// An hour given with an offset is that offset's hour, whatever the
// machine's time zone. time.Parse gives an offset the local zone uses
// the local zone itself, and the hour was truncated there: on a machine
// in America/New_York, 01:30-05:00 on the day clocks fall back (the
// second 01:00-02:00, 06:00-07:00 UTC) was taken for the first
// (05:00 UTC), so `tracelake ready` answered ready once 05:00 UTC was
// marked, while the hour asked for was not.
func TestParseHourInTheLocalZoneFallingBack(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	was := time.Local
	time.Local = ny
	t.Cleanup(func() { time.Local = was })
	utc := func(h int) time.Time { return time.Date(2026, 11, 1, h, 0, 0, 0, time.UTC) }
	for s, want := range map[string][]time.Time{
		"2026-11-01T01:30:00-04:00": {utc(5)},
		"2026-11-01T01:30:00-05:00": {utc(6)},
		"2026-11-01T02:10:00-05:00": {utc(7)},
	} {
		if got, err := parseHour(s); err != nil || !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("parseHour(%q) in %s = %v, %v; want %v", s, ny, got, err, want)
		}
	}
}

// A model is one table however its name is spelt to DuckDB (names are
// case-insensitive; main is the schema of a sink.table without one), and
// `tracelake ready` takes each spelling DuckDB takes: the mark was looked
// up by the name as given, so CDC_Shop_Orders or main.cdc_shop_orders
// was "not ready" for good, with no word that no such mark would ever be
// written (the table is there, so the hint for a misspelt name was not
// given either), while a query of either name reads the model.
func TestReadyTakesTheModelSpeltAsDuckDBTakesIt(t *testing.T) {
	dir := t.TempDir()
	path, file := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "t.duckdb")
	writeFile(t, path, fmt.Sprintf("kafka: {topics: [dbserver1], format: debezium}\nsink: {duckdb: {path: %q}}\nmetrics: {listen: \"\"}\n", file))
	db, err := sql.Open("duckdb", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE cdc_shop_orders (id INTEGER)`,
		`CREATE TABLE tracelake_ready ("table" VARCHAR, hour TIMESTAMP, marked_at TIMESTAMP)`,
		`INSERT INTO tracelake_ready VALUES ('cdc_shop_orders', '2026-12-04 10:00:00', '2026-12-04 11:02:00')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	ctx := context.Background()
	for _, table := range []string{"cdc_shop_orders", "CDC_Shop_Orders", "main.cdc_shop_orders", "MAIN.CDC_SHOP_ORDERS"} {
		if err := cmdReady(ctx, standalone, []string{"--config", path, "--table", table, "--hour", "2026-12-04T10"}); err != nil {
			t.Errorf("ready --table %s, marked for 10:00 as cdc_shop_orders: %v", table, err)
		}
	}
	for _, table := range []string{"other.cdc_shop_orders", "cdc_shop_orders_x"} {
		if err := cmdReady(ctx, standalone, []string{"--config", path, "--table", table, "--hour", "2026-12-04T10"}); !errors.As(err, new(failedCheck)) {
			t.Errorf("ready --table %s: %v, want not ready", table, err)
		}
	}
}
