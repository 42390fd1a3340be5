package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// verify of a database nothing was loaded into under the configured
// sink.table (a mistaken path or table name) answered with DuckDB's
// catalog error for the ledger ("Table with name trace_raw_ledger does
// not exist! Did you mean pg_prepared_statements?"): it now says what is
// missing and which settings to check.
func TestVerifyOfADatabaseWithoutTheLedgerSaysNothingWasLoaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.duckdb")
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE unrelated (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var out strings.Builder
	err = cmdVerify(t.Context(), &cmdEnv{stdout: &out, stderr: &out}, []string{"--duckdb", path, "--topics", "t", "--brokers", "127.0.0.1:1", "--table", "events"})
	code, msg := exitStatus(err)
	if code == 0 || !strings.Contains(msg, "nothing was loaded into "+path+" under sink.table events") || strings.Contains(msg, "Did you mean") {
		t.Errorf("exit %d: %s\n%s\nwant a failure saying nothing was loaded under sink.table events", code, msg, out.String())
	}
}

// A sink.table in a schema of its own (schema.table, which the DuckDB
// sink creates) has its ledger there (analytics.events_ledger): verify
// looked for a table named "analytics.events_ledger" in any schema,
// found none, and refused a database everything was loaded into.
func TestVerifyFindsTheLedgerOfATableInASchema(t *testing.T) {
	cfg := config.Default()
	cfg.Kafka.Topics = []string{"t"}
	cfg.Sink.Table = "analytics.events"
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "schema.duckdb")
	snk := openPrepared(t, cfg)
	rep, err := verifyDuckDBTables(t.Context(), cfg, snk)
	if err != nil {
		t.Fatalf("verify of the prepared tables of %s: %v", cfg.Sink.Table, err)
	}
	if !rep.OK {
		t.Errorf("verify of the prepared tables of %s: %q, want no problem (nothing to load)", cfg.Sink.Table, rep.Problems)
	}
}
