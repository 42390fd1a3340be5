package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file that does not parse is that one error: the config came back as
// the defaults, which callers validated, so a YAML syntax error was
// followed by "kafka.topics: at least one topic … is required", a key
// the file may well set past the error.
func TestUnparsableFileIsOneError(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"c.yaml": "kafka:\n  topics: [t]\n  brokers: [\"a:9092\"\n",
		"c.json": "{\"kafkaBootstrapServers\": \"k:9092\", \"kafkaTopic\": \"t\",}",
		"d.yaml": "kafka: {topics: [t]}\n---\nworkers: 3\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := FromFile(p)
		if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming the file", name, err)
		}
		if cfg != nil {
			t.Errorf("%s: a config came back (to be validated as if read): %+v", name, cfg.Kafka)
		}
	}
}
