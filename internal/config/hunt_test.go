package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func huntLoad(t *testing.T, yaml string) (*Config, error) {
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
func TestHuntConfigAliasedSection(t *testing.T) {
	// query.tls reuses kafka.tls's-style mapping through an alias.
	if _, err := huntLoad(t, "kafka: {topics: [a]}\notlp: {tls: &t {cert_file: \"\", key_file: \"\"}}\nquery: {tls: *t}\n"); err != nil {
		t.Errorf("query.tls given as an alias of a mapping: %v", err)
	}
	// load has no max_records: the error must name load.max_records, not
	// call the aliased mapping a non-mapping.
	_, err := huntLoad(t, "kafka: {topics: [a]}\nbatch: &b {max_records: 5}\nload: *b\n")
	if err == nil || !strings.Contains(err.Error(), "load.max_records: unknown key") {
		t.Errorf("aliased section: got %v; want load.max_records: unknown key", err)
	}
}

// The same key twice in one mapping is an error in YAML (yaml.v3 reports
// "mapping key already defined"); tracelake silently keeps the last value.
func TestHuntConfigDuplicateKeyReported(t *testing.T) {
	cfg, err := huntLoad(t, "kafka: {topics: [a]}\nworkers: 3\nworkers: 5\n")
	if err == nil || !strings.Contains(err.Error(), "workers") {
		t.Errorf("duplicate key workers accepted silently (workers=%d), want an error naming workers", cfg.Workers)
	}
}

// A file of two YAML documents: the second (here with an invalid value) is
// silently ignored instead of reported.
func TestHuntConfigSecondDocumentIgnored(t *testing.T) {
	cfg, err := huntLoad(t, "kafka: {topics: [a]}\n---\nworkers: 0\n")
	if err == nil {
		t.Errorf("a second YAML document (workers: 0) is silently ignored (workers=%d), want an error", cfg.Workers)
	}
}

// A size past int64 wraps around: 16777216TiB is 2^64 bytes, read as 0
// (sink.duckdb.memory_limit 0 means "derived"), and 16777217TiB as 1TiB.
func TestHuntConfigByteSizeOverflow(t *testing.T) {
	for _, y := range []string{
		"kafka: {topics: [a]}\nsink: {duckdb: {memory_limit: 16777216TiB}}\n",
		"kafka: {topics: [a]}\nmax_inflight_bytes: 16777217TiB\n",
	} {
		cfg, err := huntLoad(t, y)
		if err == nil {
			t.Errorf("%q accepted: memory_limit=%d max_inflight_bytes=%d; want an out-of-range error", y, cfg.Sink.DuckDB.MemoryLimit, cfg.MaxInflightBytes)
		}
	}
}

// A list in the environment given as YAML flow text (as the environment
// takes merge.models: [{…}]) is split on commas as it is: the topics are
// "[llm-traces" and "other]", names Kafka does not allow, and the config
// is valid. Either the flow list is read, or the names are rejected.
func TestHuntConfigEnvTopicsFlowList(t *testing.T) {
	t.Setenv("TRACELAKE_KAFKA_TOPICS", "[llm-traces, other]")
	cfg, err := FromFile("")
	if cfg != nil {
		err = errors.Join(err, cfg.Validate())
	}
	if err == nil && (len(cfg.Kafka.Topics) != 2 || cfg.Kafka.Topics[0] != "llm-traces" || cfg.Kafka.Topics[1] != "other") {
		t.Fatalf("TRACELAKE_KAFKA_TOPICS=[llm-traces, other] accepted as topics %q; want [llm-traces other] or an error naming kafka.topics", cfg.Kafka.Topics)
	}
}
