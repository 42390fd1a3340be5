package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reference key given null is an error, as `key:` with no value is in
// YAML: encoding/json leaves the target as it was, so "batchSize": null
// kept the default batch size without a word.
func TestReferenceKeyGivenNullIsAnError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	ref := `{"kafkaBootstrapServers": "k:9092", "kafkaTopic": "t", "databendDSN": "databend://u:p@h:8000/db",
		"disableTLS": null, "batchSize": null}`
	if err := os.WriteFile(p, []byte(ref), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromFile(p)
	for _, key := range []string{"batchSize", "disableTLS"} {
		if want := key + ": no value (null)"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
