package config

import (
	"strings"
	"testing"
)

// A value of the wrong kind (a word for a count, a number for a list, a
// list for a section) is one line naming the key and what it accepts, in
// words: it was yaml.v3's "cannot unmarshal !!str `abc` into int", which
// names a Go type rather than what to write, or, for a section, `got ""`.
func TestWrongKindOfValueSaysWhatIsAccepted(t *testing.T) {
	for y, want := range map[string]string{
		"kafka: {topics: [t]}\nworkers: abc":                             `workers: want a whole number, got "abc"`,
		"kafka: {topics: [t]}\nquery: {max_concurrent: true}":            `query.max_concurrent: want a whole number, got "true"`,
		"kafka: {topics: [t], brokers: {a: b}}":                          `kafka.brokers: want a list such as [a, b] or "a,b", got a mapping`,
		"kafka: {topics: [t], sasl: [a]}":                                `kafka.sasl: want a mapping of keys (mechanism, password, user), got a list`,
		"kafka: {topics: [t], tls: {enabled: [x]}}":                      `kafka.tls.enabled: want true or false, got a list`,
		"kafka: {topics: [t]}\nbatch: {max_interval: {a: 1}}":            `batch.max_interval: want a duration such as 10s, 5m or 1h, got a mapping`,
		"kafka: {topics: [t]}\nmetrics: {listen: [a]}":                   `metrics.listen: want a string, got a list`,
		"kafka: {topics: [t]}\nsink: {iceberg: {table_properties: [a]}}": `sink.iceberg.table_properties: want a mapping of keys, got a list`,
	} {
		_, err := loadChecked(t, y)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\nerror %v\nwant only %q", y, err, want)
		}
	}
	t.Setenv("TRACELAKE_TENANCY_REQUIRED", "1")
	_, err := loadChecked(t, "kafka: {topics: [t]}")
	const want = `tenancy.required (from TRACELAKE_TENANCY_REQUIRED): want true or false, got "1"`
	if err == nil || err.Error() != want {
		t.Errorf("TRACELAKE_TENANCY_REQUIRED=1: error %v, want only %q", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "!!") {
		t.Errorf("error speaks YAML tags: %v", err)
	}
}
