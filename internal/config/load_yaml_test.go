package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadChecked(t *testing.T, yaml string) (*Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := FromFile(p)
	if cfg != nil {
		err = errors.Join(err, cfg.Validate())
	}
	return cfg, err
}

// A section given through a YAML alias (anchors are plain YAML) is a
// mapping: it must load, not fail with "want a mapping of keys, got "b"".
func TestSectionGivenAsAliasIsDecoded(t *testing.T) {
	// query.tls reuses kafka.tls's-style mapping through an alias.
	if _, err := loadChecked(t, "kafka: {topics: [a]}\notlp: {tls: &t {cert_file: \"\", key_file: \"\"}}\nquery: {tls: *t}\n"); err != nil {
		t.Errorf("query.tls given as an alias of a mapping: %v", err)
	}
	// load has no max_records: the error must name load.max_records, not
	// call the aliased mapping a non-mapping.
	_, err := loadChecked(t, "kafka: {topics: [a]}\nbatch: &b {max_records: 5}\nload: *b\n")
	if err == nil || !strings.Contains(err.Error(), "load.max_records: unknown key") {
		t.Errorf("aliased section: got %v; want load.max_records: unknown key", err)
	}
}

// The same key twice in one mapping is an error in YAML: it is reported
// with both lines, not resolved by keeping the last value.
func TestKeyDefinedTwiceIsAnError(t *testing.T) {
	cfg, err := loadChecked(t, "kafka: {topics: [a]}\nworkers: 3\nworkers: 5\n")
	if err == nil || !strings.Contains(err.Error(), "workers: defined twice (lines 2, 3)") {
		t.Errorf("duplicate key workers: got %v (workers=%d), want workers: defined twice (lines 2, 3)", err, cfg.Workers)
	}
}

// The merge key << is refused by name rather than half-supported.
func TestYAMLMergeKeyIsRefusedByName(t *testing.T) {
	_, err := loadChecked(t, "kafka: {topics: [a]}\nbatch: &b {max_records: 5}\nload: {<<: *b}\n")
	if err == nil || !strings.Contains(err.Error(), "load.<<: the YAML merge key << is not supported") {
		t.Errorf("merge key: got %v; want an error naming load.<<", err)
	}
}

// A file of two YAML documents is an error: the second (here with an
// invalid value) would otherwise be ignored without a word.
func TestSecondYAMLDocumentIsAnError(t *testing.T) {
	cfg, err := loadChecked(t, "kafka: {topics: [a]}\n---\nworkers: 0\n")
	if err == nil {
		t.Errorf("a second YAML document (workers: 0) is silently ignored (workers=%d), want an error", cfg.Workers)
	}
}

// A size past int64 is an error, not wrapped around: 16777216TiB is 2^64
// bytes, which would read as 0 (sink.duckdb.memory_limit 0 means
// "derived"), and 16777217TiB as 1TiB.
func TestByteSizePastInt64IsAnError(t *testing.T) {
	for _, y := range []string{
		"kafka: {topics: [a]}\nsink: {duckdb: {memory_limit: 16777216TiB}}\n",
		"kafka: {topics: [a]}\nmax_inflight_bytes: 16777217TiB\n",
	} {
		cfg, err := loadChecked(t, y)
		if err == nil || !strings.Contains(err.Error(), "want a size such as") {
			t.Errorf("%q: %v: memory_limit=%d max_inflight_bytes=%d; want an out-of-range error", y, err, cfg.Sink.DuckDB.MemoryLimit, cfg.MaxInflightBytes)
		}
	}
}

// A list in the environment may be YAML flow text (as the environment
// takes merge.models: [{…}]): it is read as a list, not split on commas
// into "[llm-traces" and "other]".
func TestEnvListAsYAMLFlowText(t *testing.T) {
	t.Setenv("TRACELAKE_KAFKA_TOPICS", "[llm-traces, other]")
	cfg, err := FromFile("")
	if cfg != nil {
		err = errors.Join(err, cfg.Validate())
	}
	if err != nil || len(cfg.Kafka.Topics) != 2 || cfg.Kafka.Topics[0] != "llm-traces" || cfg.Kafka.Topics[1] != "other" {
		t.Fatalf("TRACELAKE_KAFKA_TOPICS=[llm-traces, other]: topics %q, err %v; want [llm-traces other]", cfg.Kafka.Topics, err)
	}
}

// Topic names follow Kafka's rule; one that breaks it is one error naming
// kafka.topics.
func TestTopicNamesFollowKafkasRule(t *testing.T) {
	for _, bad := range []string{"[a", "..", "a b", "té", strings.Repeat("x", 250)} {
		t.Setenv("TRACELAKE_KAFKA_TOPICS", bad)
		cfg, err := FromFile("")
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "kafka.topics: want topic names") {
			t.Errorf("topic %q: got %v; want an error naming kafka.topics", bad, err)
		}
	}
	t.Setenv("TRACELAKE_KAFKA_TOPICS", "a.b_c-D9,"+strings.Repeat("x", 249))
	if cfg, err := FromFile(""); err != nil || cfg.Validate() != nil {
		t.Errorf("valid topic names refused: %v", errors.Join(err, cfg.Validate()))
	}
}

// A key written with no value (`listen:` and nothing after it, or ~) is
// an error naming the key: yaml.v3 leaves the field as it was, so the
// default stayed in force while the file seemed to set it (metrics.listen
// stayed 127.0.0.1:9464 for an operator turning the endpoint off). A list
// given null is emptied, as null says.
func TestNullValueIsAnErrorNotTheDefault(t *testing.T) {
	for _, y := range []string{
		"metrics: {listen: }\n",
		"kafka: {topics: [a], group: ~}\n",
		"workers: null\n",
		"batch: {max_bytes: ~}\n",
		"batch: {max_interval: ~}\n",
		"tenancy: {required: ~}\n",
	} {
		if !strings.HasPrefix(y, "kafka:") {
			y = "kafka: {topics: [a]}\n" + y
		}
		cfg, err := loadChecked(t, y)
		if err == nil || !strings.Contains(err.Error(), "no value (null)") {
			t.Errorf("%q: got %v (listen %q, group %q, workers %d, batch %+v); want an error naming the key with no value",
				y, err, cfg.Metrics.Listen, cfg.Kafka.Group, cfg.Workers, cfg.Batch)
		}
	}
	t.Setenv("TRACELAKE_WORKERS", "~")
	if cfg, err := FromFile(""); err == nil || !strings.Contains(err.Error(), "workers (from TRACELAKE_WORKERS): no value (null)") {
		t.Errorf("TRACELAKE_WORKERS=~: got %v (workers %d); want an error naming it", err, cfg.Workers)
	}
	t.Setenv("TRACELAKE_WORKERS", "2")
	cfg, err := loadChecked(t, "kafka: {topics: [a], brokers: ~}\nquery: {shared_tables: ~}\n")
	if err != nil || len(cfg.Query.SharedTables) != 0 {
		t.Errorf("lists given null: %v, shared_tables %q; want them empty", err, cfg.Query.SharedTables)
	}
}

// A fraction given to a count is an error, not truncated: workers: 2.5
// ran 2 workers and batch.max_records: 0.5 was reported as 0. A whole
// number written as a float (1e3) is that number.
func TestFractionForAWholeNumberIsAnError(t *testing.T) {
	for _, y := range []string{"workers: 2.5\n", "batch: {max_records: 0.5}\n", "query: {max_concurrent: 3.9}\n"} {
		cfg, err := loadChecked(t, "kafka: {topics: [a]}\n"+y)
		if err == nil || !strings.Contains(err.Error(), "want a whole number") {
			t.Errorf("%q: got %v (workers %d, max_records %d, max_concurrent %d); want a whole number refused",
				y, err, cfg.Workers, cfg.Batch.MaxRecords, cfg.Query.MaxConcurrent)
		}
	}
	t.Setenv("TRACELAKE_WORKERS", "1.5")
	if cfg, err := FromFile(""); err == nil || !strings.Contains(err.Error(), "workers (from TRACELAKE_WORKERS): want a whole number") {
		t.Errorf("TRACELAKE_WORKERS=1.5: got %v (workers %d); want a whole number refused", err, cfg.Workers)
	}
	t.Setenv("TRACELAKE_WORKERS", "2")
	if cfg, err := loadChecked(t, "kafka: {topics: [a]}\nbatch: {max_records: 1e3}\n"); err != nil || cfg.Batch.MaxRecords != 1000 {
		t.Errorf("max_records: 1e3: %v, %d; want 1000", err, cfg.Batch.MaxRecords)
	}
}

// A variable named for a whole section (TRACELAKE_SINK) is an error
// naming what the section takes: sections are set key by key, and the
// variable was ignored without a word.
func TestEnvVariableNamingASectionIsAnError(t *testing.T) {
	t.Setenv("TRACELAKE_SINK", "{type: iceberg}")
	cfg, err := FromFile("")
	if err == nil || !strings.Contains(err.Error(), "TRACELAKE_SINK: no setting has this name (accepted: ") ||
		!strings.Contains(err.Error(), "TRACELAKE_SINK_TYPE") {
		t.Errorf("TRACELAKE_SINK set: got %v (sink.type %s); want an error naming it and the section's keys", err, cfg.Sink.Type)
	}
}
