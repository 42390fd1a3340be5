package config

import (
	"os"
	"path/filepath"
	"testing"
)

// The reference's isSASL connects over TLS unless disableTLS is true:
// bend-ingest-kafka sets security.protocol SASL_SSL when DisableTLS is
// false, its default (batch_reader.go, BuildKafkaConfigMap; before that a
// TLS dialer "if !cfg.DisableTLS"), and README says "isSASL means SASL
// PLAIN ... over TLS unless disableTLS". A file that leaves disableTLS
// out must not send the SASL password to the brokers in plain text.
func TestReferenceSASLUsesTLSUnlessDisabled(t *testing.T) {
	for _, c := range []struct {
		json string
		tls  bool
	}{
		{`{"kafkaTopic": "t", "isSASL": true, "saslUser": "u", "saslPassword": "p"}`, true},
		{`{"kafkaTopic": "t", "isSASL": true, "saslUser": "u", "saslPassword": "p", "disableTLS": false}`, true},
		{`{"kafkaTopic": "t", "isSASL": true, "saslUser": "u", "saslPassword": "p", "disableTLS": true}`, false},
		{`{"kafkaTopic": "t", "isSASL": false}`, false},
	} {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Kafka.TLS.Enabled != c.tls {
			t.Errorf("%s: kafka.tls.enabled %v, want %v", c.json, cfg.Kafka.TLS.Enabled, c.tls)
		}
	}
}
