package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// `ready --table` takes a model without the models' schema (sink.table's,
// here analytics), and the hint of a name with no table looks for it there:
// the model analytics.cdc_shop_orders exists, its hour 11:00 is not marked
// yet, and the answer must not send the operator looking for a misspelling.
func TestReadyNotReadyHintFindsTheModelInSinkSchema(t *testing.T) {
	dir := t.TempDir()
	path, file := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "t.duckdb")
	writeFile(t, path, fmt.Sprintf("kafka: {topics: [dbserver1], format: debezium}\nsink: {table: analytics.events, duckdb: {path: %q}}\nmetrics: {listen: \"\"}\n", file))
	db, err := sql.Open("duckdb", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE SCHEMA analytics`, `CREATE TABLE analytics.cdc_shop_orders (id INTEGER)`,
		`CREATE TABLE tracelake_ready ("table" VARCHAR, hour TIMESTAMP, marked_at TIMESTAMP)`,
		`INSERT INTO tracelake_ready VALUES ('cdc_shop_orders', '2026-12-04 10:00:00', '2026-12-04 11:02:00')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	ctx := context.Background()
	var out bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &out}
	if err := cmdReady(ctx, env, []string{"--config", path, "--table", "cdc_shop_orders", "--hour", "2026-12-04T10"}); err != nil {
		t.Fatalf("ready for 10:00: %v (%s)", err, out.String())
	}
	out.Reset()
	err = cmdReady(ctx, env, []string{"--config", path, "--table", "cdc_shop_orders", "--hour", "2026-12-04T11"})
	if !errors.As(err, new(failedCheck)) {
		t.Fatalf("ready for 11:00: %v, want not ready", err)
	}
	if strings.Contains(out.String(), "no table of that name") {
		t.Errorf("model analytics.cdc_shop_orders exists, yet: %s", out.String())
	}
}
