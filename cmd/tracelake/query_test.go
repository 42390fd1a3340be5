package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	adbcfs "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-adbc/go/adbc/sqldriver"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tracelake/tracelake/internal/tracegen"
)

func init() {
	sql.Register("adbc-flightsql", sqldriver.Driver{Driver: adbcfs.NewDriver(memory.DefaultAllocator)})
}

// flightDB is a database/sql handle on a Flight SQL endpoint through
// ADBC's driver, as a client with that token and tenant ("" for none).
func flightDB(t *testing.T, addr, token, tenant string) *sql.DB {
	t.Helper()
	dsn := "uri=grpc+tcp://" + addr
	if token != "" {
		dsn += ";" + adbcfs.OptionAuthorizationHeader + "=Bearer " + token
	}
	if tenant != "" {
		dsn += ";" + adbcfs.OptionRPCCallHeaderPrefix + "x-scope-orgid=" + tenant
	}
	db, err := sql.Open("adbc-flightsql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// `tracelake run` with the embedded DuckDB and OTLP receivers serves
// Arrow Flight SQL while it loads: ADBC's driver reads the spans through
// a prepared statement, each token sees the tenants it may read and no
// other's, a token that reads every tenant sees all, and no token or a
// write are refused — all while run holds the database file.
func TestFlightSQLWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("tok-writer write=*\ntok-a read=a\ntok-ops read=*\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	otlpAddr, flightAddr := freeAddr(t), freeAddr(t)
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("otlp: {http: %q, tokens_file: %q}\nsink: {duckdb: {path: %q}}\nquery: {flight_sql: %q}\n",
		otlpAddr, tokens, filepath.Join(dir, "lake.duckdb"), flightAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening") // after Flight SQL started
	defer func() {
		run.cmd.Process.Signal(syscall.SIGTERM)
		run.cmd.Wait()
	}()
	g := tracegen.New(7)
	spans := map[string]int{}
	for _, tenant := range []string{"a", "b", "b"} {
		td := g.OTLPTrace()
		spans[tenant] += td.SpanCount()
		req, _ := http.NewRequest(http.MethodPost, "http://"+otlpAddr+"/v1/traces", bytes.NewReader(marshalOTLP(t, "otlp_proto", td)))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Authorization", "Bearer tok-writer")
		req.Header.Set("X-Scope-OrgID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tenant %s's spans answered %d:\n%s", tenant, resp.StatusCode, run.log)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	count := func(db *sql.DB, q string, args ...any) (map[string]int, error) {
		st, err := db.PrepareContext(ctx, q) // JDBC and the adapter's parameters go through prepared statements
		if err != nil {
			return nil, err
		}
		defer st.Close()
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		got := map[string]int{}
		for rows.Next() {
			var tenant string
			var n int
			if err := rows.Scan(&tenant, &n); err != nil {
				return nil, err
			}
			got[tenant] = n
		}
		return got, rows.Err()
	}
	const byTenant = `SELECT tenant_id, count(*)::INTEGER FROM otel_spans WHERE duration_ns >= ? GROUP BY ALL`
	got, err := count(flightDB(t, flightAddr, "tok-a", ""), byTenant, int64(0))
	if err != nil {
		t.Fatalf("tenant a's token: %v\n%s", err, run.log)
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]int{"a": spans["a"]}) {
		t.Errorf("tenant a's token read %v, want a's %d spans alone", got, spans["a"])
	}
	if got, err = count(flightDB(t, flightAddr, "tok-ops", ""), byTenant, int64(0)); err != nil || fmt.Sprint(got) != fmt.Sprint(spans) {
		t.Errorf("a token reading every tenant read %v (%v), want %v", got, err, spans)
	}
	if got, err = count(flightDB(t, flightAddr, "tok-ops", "b"), byTenant, int64(0)); err != nil || fmt.Sprint(got) != fmt.Sprint(map[string]int{"b": spans["b"]}) {
		t.Errorf("the operator's token naming b read %v (%v), want b's %d spans", got, err, spans["b"])
	}
	for _, c := range []struct{ token, tenant, q, want string }{
		{"", "", byTenant, "Unauthenticated"},
		{"tok-a", "b", byTenant, "PermissionDenied"},
		{"tok-writer", "a", byTenant, "PermissionDenied"},
		{"tok-a", "", `SELECT tenant_id, count(*) FROM main.otel_spans GROUP BY ALL`, "InvalidArgument"},
		{"tok-ops", "", `DELETE FROM otel_spans`, "InvalidArgument"},
	} {
		_, err := count(flightDB(t, flightAddr, c.token, c.tenant), c.q, int64(0))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("token %q tenant %q %s: %v, want %s", c.token, c.tenant, c.q, err, c.want)
		}
	}
}
