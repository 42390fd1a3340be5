package merge

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
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
