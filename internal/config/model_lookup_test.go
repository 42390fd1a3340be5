package config

import (
	"strings"
	"testing"
)

// A model asked for by name (merge --model, --rebuild, reconcile --model)
// in a config without merge.models said "no model "x" in merge.models
// (configured: )": an empty list printed as nothing. It says there are
// none; with models it lists them.
func TestModelNotFoundSaysWhatIsConfigured(t *testing.T) {
	f := func(yaml, want string) {
		t.Helper()
		cfg, err := FromYAML([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cfg.Model("otel_spans_dedup")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), ": )") {
			t.Errorf("%s: error %v, want it to say %q", yaml, err, want)
		}
	}
	f("kafka: {topics: [t]}", "merge.models has none")
	f("kafka: {topics: [t]}\nmerge: {models: [{name: a, target: ta, key: [id], columns: {id: {path: $.id, type: VARCHAR}}}]}", "configured: a")
}
