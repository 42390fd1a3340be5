package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A reference (bend-ingest-kafka) key given a value of the wrong JSON
// kind says what it accepts, as tracelake's own keys do: it was
// encoding/json's "json: cannot unmarshal string into Go value of type
// int", which names a Go type. The value itself is not repeated (it may
// be saslPassword's).
func TestReferenceKeyOfWrongKindSaysWhatIsAccepted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	ref := `{"kafkaBootstrapServers": "k:9092", "kafkaTopic": "t", "databendDSN": "databend://u:p@h:8000/db",
		"batchSize": "500", "isSASL": "yes", "saslUser": "u", "saslPassword": 12345678}`
	if err := os.WriteFile(p, []byte(ref), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromFile(p)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"batchSize: want a whole number, got a JSON string",
		"isSASL: want true or false, got a JSON string",
		"saslPassword: want a string, got a JSON number",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "12345678") {
		t.Errorf("error speaks Go types or repeats the password:\n%v", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("%d lines for 3 bad keys:\n%v", n, err)
	}
}
