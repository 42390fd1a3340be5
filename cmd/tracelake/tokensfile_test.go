package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// A tokens file that is missing or does not parse stops the start with an
// error naming the file; it said "tokens file: open …" without the key
// that names it, where every other file's error (kafka.tls.ca_file,
// otlp.tls) names its key. Both places that read it (the receivers' and
// the read side's) name otlp.tokens_file.
func TestTokensFileErrorNamesItsKey(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(bad, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "missing"), bad} {
		cfg := config.Default()
		cfg.OTLP.TokensFile = path
		_, readErr := readTenants(cfg)
		rcv, writeErr := startReceivers(cfg, nil, nil, nil) // fails before it listens
		if rcv != nil {
			t.Fatal("receivers started with a bad tokens file")
		}
		for _, err := range []error{readErr, writeErr} {
			if err == nil || !strings.HasPrefix(err.Error(), "otlp.tokens_file: ") || !strings.Contains(err.Error(), path) {
				t.Errorf("%s: error %v, want one starting otlp.tokens_file: and naming the file", path, err)
			}
		}
	}
}
