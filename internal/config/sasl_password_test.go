package config

import (
	"strings"
	"testing"
)

// A SASL mechanism without a password is refused at startup, naming
// kafka.sasl.password: a password left out, or given from a variable
// that is empty (TRACELAKE_KAFKA_SASL_PASSWORD=$UNSET), was accepted, and
// the process ran without ever joining its group (the brokers refuse the
// login; Kafka's PLAIN refuses an empty password outright).
func TestSASLWithoutPasswordIsAnError(t *testing.T) {
	const want = "kafka.sasl.password: a password is required with kafka.sasl.mechanism PLAIN"
	_, err := loadChecked(t, "kafka: {topics: [t], sasl: {mechanism: PLAIN, user: u}}")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("no password: error %v, want %q", err, want)
	}
	t.Setenv("TRACELAKE_KAFKA_SASL_PASSWORD", "")
	_, err = loadChecked(t, "kafka: {topics: [t], sasl: {mechanism: PLAIN, user: u, password: in-the-file}}")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("password from an empty variable: error %v, want %q", err, want)
	}
	if err != nil && strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("more than one error for one empty password: %v", err)
	}
	t.Setenv("TRACELAKE_KAFKA_SASL_PASSWORD", "s3cret")
	if _, err := loadChecked(t, "kafka: {topics: [t], sasl: {mechanism: SCRAM-SHA-512, user: u}}"); err != nil {
		t.Errorf("password from the environment refused: %v", err)
	}
}
