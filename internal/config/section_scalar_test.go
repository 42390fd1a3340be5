package config

import (
	"strings"
	"testing"
)

// A section given a single value is refused without repeating it: the
// value is most likely the secret the section holds, written where the
// section goes (sink.databend: "databend://u:pw@h/db", the DSN meant for
// sink.databend.dsn), and the error quoted it whole. It is one line: the
// section's keys were also reported missing (sink.databend.dsn: a DSN is
// required).
func TestSectionGivenAValueDoesNotRepeatIt(t *testing.T) {
	for y, want := range map[string]string{
		"kafka: {topics: [t]}\nsink: {type: databend, databend: \"databend://u:leakPW@h:8000/db\"}": "sink.databend: want a mapping of keys (disable_variant_check, dsn, prefix, purge, stage, streaming_load, timeout, uploads), got a string",
		"kafka: {topics: [t], sasl: leakPW}": "kafka.sasl: want a mapping of keys (mechanism, password, user), got a string",
		"kafka: {topics: [t], tls: yes}":     "kafka.tls: want a mapping of keys (",
	} {
		_, err := loadChecked(t, y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\nerror %v\nwant %q", y, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: more than one line for one mistake:\n%v", y, err)
		}
		if err != nil && strings.Contains(err.Error(), "leakPW") {
			t.Errorf("%s: the error repeats the value: %v", y, err)
		}
	}
}
