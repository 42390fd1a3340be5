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
