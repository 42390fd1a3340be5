package config

import (
	"strings"
	"testing"
)

// A sink.duckdb key is read only with sink.type duckdb, as a
// sink.databend or sink.iceberg key is only with theirs: with another
// sink it was accepted and ignored without a word (a database path, a
// memory limit or threads that applied to nothing).
func TestDuckDBKeyWithAnotherSinkIsAnError(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"sink: {type: iceberg, duckdb: {path: /data/x.duckdb}}",
			"sink.duckdb.path: set, but sink.type is iceberg: the duckdb section is read only with sink.type duckdb"},
		{"sink: {type: databend, databend: {dsn: 'databend://u:p@h:8000/d'}, duckdb: {threads: 4}}",
			"sink.duckdb.threads: set, but sink.type is databend: the duckdb section is read only with sink.type duckdb"},
	} {
		_, err := loadChecked(t, "kafka: {topics: [t]}\n"+tc.yaml)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
			continue
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
			t.Errorf("%s: %d errors for one key: %v", tc.yaml, n, err)
		}
	}
	// The DuckDB section's defaults with another sink (what tracelake
	// config prints) are not keys set.
	if _, err := loadChecked(t, "kafka: {topics: [t]}\nsink: {type: iceberg, duckdb: {path: ./tracelake.duckdb, json_compression: auto}}"); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}

// A misspelt sink.type is one error, naming sink.type: the keys of the
// sink it meant were each reported as well, as set with another sink.
func TestMisspeltSinkTypeIsOneError(t *testing.T) {
	_, err := loadChecked(t, "kafka: {topics: [t]}\nsink: {type: databnd, databend: {dsn: 'databend://u:p@h:8000/d', uploads: 4}}")
	if err == nil || !strings.HasPrefix(err.Error(), `sink.type: want duckdb, databend or iceberg, got "databnd"`) {
		t.Fatalf("error %v, want sink.type's", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
		t.Errorf("%d errors for one misspelt sink.type: %v", n, err)
	}
}
