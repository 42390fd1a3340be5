package config

import (
	"strings"
	"testing"
)

// A misspelt key inside a list item (a model, a heartbeat, a shard) is
// one error, naming it with the keys accepted: the item was then
// validated as read without the key, and the key it meant was reported
// missing as well (merge.models[0].kye: unknown key, then
// merge.models[0].key: at least one key column is required), two or
// three errors for one typo. The same typo through the environment too;
// the item's other keys are still checked.
func TestMisspeltKeyInAListItemIsOneError(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"kafka: {topics: [t]}\nmerge: {models: [{nmae: m, key: [a], columns: {a: {path: $.a, type: INT}}}]}",
			"merge.models[0].nmae: unknown key (accepted: action, columns, format, key, name, source, target, version)"},
		{"kafka: {topics: [t]}\nmerge: {models: [{name: m, kye: [a], columns: {a: {path: $.a, type: INT}}}]}",
			"merge.models[0].kye: unknown key (accepted: action, columns, format, key, name, source, target, version)"},
		{"kafka: {topics: [t], format: debezium}\ncdc: {heartbeats: [{topik: x}]}",
			"cdc.heartbeats[0].topik: unknown key (accepted: lag, table, topic, topics)"},
	} {
		_, err := loadChecked(t, tc.yaml)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\nerror %v\nwant only %q", tc.yaml, err, tc.want)
		}
	}
	// Another item's problems are still reported.
	_, err := loadChecked(t, "kafka: {topics: [t]}\nmerge: {models: [{nmae: m}, {name: n, key: [a], columns: {a: {path: $.a, type: INT}}, format: xml}]}")
	if err == nil || !strings.Contains(err.Error(), `merge.models[1].format: want json or debezium, got "xml"`) {
		t.Errorf("the second model's error is lost: %v", err)
	}
	t.Setenv("TRACELAKE_MERGE_MODELS", "[{name: m, kye: [a], columns: {a: {path: $.a, type: INT}}}]")
	_, err = loadChecked(t, "kafka: {topics: [t]}")
	if err == nil || strings.Count(err.Error(), "\n") > 0 || !strings.Contains(err.Error(), "kye: unknown key") {
		t.Errorf("through the environment: error %v, want the unknown key alone", err)
	}
}
