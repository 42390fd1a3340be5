package config

import (
	"os"
	"path/filepath"
	"testing"
)

// A key given twice in the reference JSON config is an error, as in a
// YAML file: encoding/json keeps the last value without a word, so which
// setting was in force depended on the order of the lines.
func TestReferenceKeyGivenTwiceIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	ref := `{"kafkaBootstrapServers": "k:9092", "kafkaTopic": "t", "databendDSN": "databend://u:p@h:8000/db",
		"workers": 2, "batchSize": 10, "workers": 3}`
	if err := os.WriteFile(p, []byte(ref), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := FromFile(p)
	const want = "workers: given twice: give each key once"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want only %q", err, want)
	}
	if cfg != nil && cfg.Batch.MaxRecords != 10 {
		t.Errorf("the other keys were not read: batchSize %d", cfg.Batch.MaxRecords)
	}
}
