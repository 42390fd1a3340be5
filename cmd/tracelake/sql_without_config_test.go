package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// README: `tracelake sql --duckdb PATH` "works without a config", and
// "while run holds the DuckDB file, through it". Without a config the
// client's sink.table is the default (trace_raw), which no OTLP, CDC or
// transform run loads (run's own here is "events"): since aeebb08 the
// socket refuses the query with a usage error, though sql does not
// depend on sink.table at all. Expected: the query is answered.
func TestSQLWithoutAConfigGoesThroughRun(t *testing.T) {
	cfg, _ := servedSink(t, t.TempDir())
	cf := configFlags{duckdb: cfg.Sink.DuckDB.Path}
	client, err := cf.loadFor(false)
	if err != nil {
		t.Fatal(err)
	}
	held := heldError{path: cfg.Sink.DuckDB.Path, table: client.Sink.Table, err: duckdb.ErrLocked}
	var out bytes.Buffer
	err = throughRun(context.Background(), held, []string{"sql", "--duckdb", cfg.Sink.DuckDB.Path, "SELECT 1 AS one"}, &out)
	if code, msg := exitStatus(err); code != exitOK || !strings.Contains(out.String(), "one") {
		t.Errorf("sql --duckdb (no config; the client's sink.table is %q) through run: exit %d, %q, output %q; want the query answered",
			client.Sink.Table, code, msg, out.String())
	}
}
