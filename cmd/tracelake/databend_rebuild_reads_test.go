package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// `tracelake genai rebuild` on Databend reads the whole spans table with
// a SELECT without LIMIT, then replaces genai_operations with what it
// derived. An administrator's SET GLOBAL max_result_rows (scope Both,
// settings/src/settings_default.rs) makes databend-query add LIMIT
// max_result_rows to such a query (Planner::add_max_rows_limit,
// sql/src/planner/planner.rs): the read is cut silently and the rebuild
// replaces the operations of every span with those of the first few.
func TestGenAIRebuildReadIsWholeUnderMaxResultRows(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("otel_spans", []string{"span_id", "kpartition"}, []string{"VARCHAR", "BIGINT"})
	for i := range 3 {
		srv.AppendRow("otel_spans", databendtest.Row{"span_id": json.RawMessage(fmt.Sprintf(`"s%d"`, i)), "kpartition": json.RawMessage("0")})
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"max_result_rows": "1"} })
	db := copyOfSpans(t, srv, []duckdbsink.Column{{Name: "span_id", Type: "VARCHAR"}, {Name: "kpartition", Type: "BIGINT"}}, "")
	var n int
	if err := db.QueryRow("SELECT count(*) FROM otel_spans").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("the rebuild read %d of the table's 3 spans", n)
	}
}

// Databend writes a TIMESTAMP in a result, and reads a string compared
// with one, in the session's timezone (formats field_encoder/string.rs
// timestamp_text; types/timestamp.rs string_to_timestamp), and an
// administrator's SET GLOBAL timezone (scope Both,
// settings/src/settings_default.rs) changes it for every session that does
// not set its own. The rebuild and the report read spans' times as UTC
// text and filter them by a UTC literal, so under another server timezone
// they would read every time shifted and the wrong rows.
func TestGenAIReadsTimesInUTCUnderAServerTimezone(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("otel_spans", []string{"span_id", "start_time"}, []string{"VARCHAR", "TIMESTAMP"})
	early := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	late := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{early, late} {
		srv.AppendRow("otel_spans", databendtest.Row{"span_id": json.RawMessage(fmt.Sprintf(`"s%d"`, i)), "start_time": json.RawMessage(fmt.Sprint(at.UnixMicro()))})
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"timezone": "Asia/Shanghai"} })
	since := databendTime(time.Date(2024, 5, 1, 6, 0, 0, 0, time.UTC))
	db := copyOfSpans(t, srv, []duckdbsink.Column{{Name: "span_id", Type: "VARCHAR"}, {Name: "start_time", Type: "TIMESTAMP"}}, since)
	rows, err := db.Query("SELECT span_id, start_time FROM otel_spans ORDER BY span_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+" "+at.UTC().Format(time.RFC3339))
	}
	if want := []string{"s1 " + late.Format(time.RFC3339)}; !slices.Equal(got, want) {
		t.Errorf("read the spans from %s on as %q, want %q", since, got, want)
	}
}

// copyOfSpans reads columns cols of the test server's otel_spans (its
// rows from since on, when set) through the Databend sink into an
// in-memory DuckDB, as the GenAI rebuild and the report read them.
func copyOfSpans(t *testing.T, srv *databendtest.Server, cols []duckdbsink.Column, since string) *sql.DB {
	t.Helper()
	snk, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "otel_spans"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := copyDatabendRows(context.Background(), snk, db, "otel_spans", cols, since); err != nil {
		t.Fatal(err)
	}
	return db
}
