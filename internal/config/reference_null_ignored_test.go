package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reference key that has no effect here (mockData, dataFormat, …) given
// null is no error: there is no default to leave in force without a word,
// the reference tool takes it, and its config loaded unchanged before.
func TestReferenceKeyWithoutEffectGivenNullLoads(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	ref := `{"kafkaBootstrapServers": "k:9092", "kafkaTopic": "t", "databendDSN": "databend://u:p@h:8000/db",
		"mockData": null, "dataFormat": null, "maxWait": null, "batchSize": null}`
	if err := os.WriteFile(p, []byte(ref), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromFile(p)
	if err == nil || !strings.Contains(err.Error(), "batchSize: no value (null)") {
		t.Errorf("error %v, want batchSize refused", err)
	}
	for _, key := range []string{"mockData", "dataFormat", "maxWait"} {
		if err != nil && strings.Contains(err.Error(), key+":") {
			t.Errorf("%s, without effect, given null was refused: %v", key, err)
		}
	}
}
