package config

import (
	"errors"
	"strings"
	"testing"
)

// On Databend a model also writes its scratch table <name>_increment
// (internal/merge/databend.go), and drops it when its target is absent
// (Reset, to make it again with the model's columns). Not claimed here, a
// model whose target was another's <name>_increment was accepted, and
// the other model's first setup dropped that target with every row the
// first had merged; its watermarks stayed, so they were never merged
// again.
func TestModelTargetMustNotBeAnotherModelsIncrementOnDatabend(t *testing.T) {
	const databend = `sink: {type: databend, databend: {dsn: "databend://u:p@h:8000/db"}}` + "\n"
	const models = "merge: {models: [{name: a, key: [id], columns: {id: {path: $.id, type: VARCHAR}}}, {name: b, target: a_increment, key: [id], columns: {id: {path: $.id, type: VARCHAR}}}]}\n"
	cfg, err := FromYAML([]byte("kafka: {topics: [t]}\n" + databend + models))
	err = errors.Join(err, cfg.Validate())
	if want := "model b writes the table a_increment, which is written by merge.models[0] (a)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("on Databend: got %v, want %q", err, want)
	}
	// DuckDB's merge has no such table: the name is free there.
	cfg, err = FromYAML([]byte("kafka: {topics: [t]}\n" + models))
	if err = errors.Join(err, cfg.Validate()); err != nil {
		t.Errorf("on DuckDB: %v, want no error", err)
	}
}
