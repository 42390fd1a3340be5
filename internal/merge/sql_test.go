package merge

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sqltext"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The SQL printed per dialect, checked against testdata/*.golden
// (go test ./internal/merge -run Golden -update rewrites them).
func TestSQLGolden(t *testing.T) {
	spans := config.Model{Name: "spans", Target: "trace_spans", Key: []string{"span_id"}, Columns: config.Columns{
		{Name: "span_id", Path: "$.span_id", Type: "VARCHAR"},
		{Name: "model", Path: "$.model", Type: "VARCHAR"},
		{Name: "total_tokens", Path: "$.usage.total_tokens", Type: "BIGINT"},
		{Name: "tool_calls", Path: "$.tool_calls", Type: "JSON"},
		{Name: "first_tool", Path: "$.tool_calls[0].name", Type: "VARCHAR"},
		{Name: "input_tokens", Path: `$.attributes."gen_ai.usage.input_tokens"`, Type: "BIGINT"},
	}}.WithDefaults("trace_raw")
	for _, m := range []config.Model{customers(), orders(), spans} {
		for _, d := range []string{DialectDatabend, DialectDuckDB} {
			got, err := SQL(m, d)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", m.Name+"."+d+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the generated SQL:\n%s", path, got)
			}
		}
	}
	if _, err := SQL(spans, "oracle"); err == nil {
		t.Error("unknown dialect accepted")
	}
}

// Every literal of a model's name in its Databend SQL is quoted the way
// Databend's lexer reads it back (sqltext.DatabendString): the claim row,
// the increment's watermark join and the watermark advance must all name
// one model. A name with a backslash is out of reach of the config
// (names are identifiers), so this holds the quoting to one rule.
func TestDatabendSQLQuotesModelNameOneWay(t *testing.T) {
	m := customers()
	m.Name = `odd\model`
	model, err := SQL(m, DialectDatabend)
	if err != nil {
		t.Fatal(err)
	}
	dd := Dedup{Table: &otel.Spans, Name: `odd\spans`}
	st := dd.Databend()
	dedup := strings.Join(append(append(st.Setup, st.Merge...), dd.DatabendCountsSQL()), ";\n")
	for name, sql := range map[string]string{m.Name: model, dd.model(): dedup} {
		plain, escaped := sqltext.String(name), sqltext.DatabendString(name)
		if n := strings.Count(sql, plain); n > 0 || !strings.Contains(sql, escaped) {
			t.Errorf("model %s: quoted %s %d times, want %s throughout:\n%s", name, plain, n, escaped, sql)
		}
	}
}

// The query for a Databend target names its table in the current
// database, or in the schema merge.models allows before a dot: a
// qualified target counted in the current database would be found absent
// at every setup, and its watermarks forgotten each time.
func TestDatabendTargetCountNamesItsDatabase(t *testing.T) {
	f := func(target, want string) {
		t.Helper()
		if got := targetCountSQL(target); got != want {
			t.Errorf("target %s: %s\nwant %s", target, got, want)
		}
	}
	f("orders", `SELECT count(*) FROM system.tables WHERE database = current_database() AND name = 'orders'`)
	f("sales.Orders", `SELECT count(*) FROM system.tables WHERE database = 'sales' AND name = 'Orders'`)
}
