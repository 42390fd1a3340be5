package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A .json file that is not valid JSON (a trailing comma, as editors leave
// one) is reported as such, with the line: it was read as YAML, which
// takes the comma, and the reference tool's keys were each refused as an
// unknown key of tracelake's own config, three lines that pointed away
// from the comma.
func TestInvalidJSONFileIsASyntaxError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	ref := "{\"kafkaBootstrapServers\": \"k:9092\",\n \"kafkaTopic\": \"t\",\n \"databendDSN\": \"databend://u:p@h:8000/db\",\n}\n"
	if err := os.WriteFile(p, []byte(ref), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromFile(p)
	if err == nil || strings.Contains(err.Error(), "unknown key") || !strings.Contains(err.Error(), "not valid JSON") || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("error %v, want one saying the file is not valid JSON at line 4", err)
	}
}
