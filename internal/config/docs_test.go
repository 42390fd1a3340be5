package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// readmeYAMLBlocks are the ```yaml blocks of the README, in order, each
// with the line it starts at.
func readmeYAMLBlocks(t *testing.T) (blocks []string, lines []int) {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	inBlock, start := false, 0
	var cur strings.Builder
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case !inBlock && l == "```yaml":
			inBlock, start = true, i+2
			cur.Reset()
		case inBlock && l == "```":
			inBlock = false
			blocks, lines = append(blocks, cur.String()), append(lines, start)
		case inBlock:
			cur.WriteString(l + "\n")
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no ```yaml block in README.md")
	}
	return blocks, lines
}

var topLevelKafka = regexp.MustCompile(`(?m)^kafka:`)

// Every configuration the README shows loads and validates as it is: a
// reader copies them. A block that shows one section only (sink, merge)
// is checked with a topic to read, which is all the rest needs.
func TestREADMEConfigExamplesValidate(t *testing.T) {
	blocks, lines := readmeYAMLBlocks(t)
	for i, b := range blocks {
		if !topLevelKafka.MatchString(b) {
			b = "kafka: {topics: [llm-traces]}\n" + b
		}
		cfg, err := FromYAML([]byte(b))
		if cfg != nil {
			err = errors.Join(err, cfg.Validate())
		}
		if err != nil {
			t.Errorf("README.md's yaml block at line %d does not validate:\n%v", lines[i], err)
		}
	}
}

// The README's configuration reference (its first yaml block) gives each
// key its default: loaded, it is the configuration of a file that sets
// only its topic.
func TestREADMEConfigReferenceIsTheDefault(t *testing.T) {
	blocks, _ := readmeYAMLBlocks(t)
	documented, err := FromYAML([]byte(blocks[0]))
	if err != nil {
		t.Fatal(err)
	}
	def, err := FromYAML([]byte("kafka: {topics: [llm-traces]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.NumCPU() < 2 {
		def.Workers = documented.Workers // the default is one per core, at most 2
	}
	// An empty list or map written out ([] or {}) is the default nil one.
	for _, c := range []*Config{documented, def} {
		c.Merge.Concurrency = c.MergeConcurrency()
		for _, p := range []any{&c.Sink.Iceberg.TableProperties, &c.Merge.Models, &c.OTLP.Signals, &c.Query.SharedTables} {
			if v := reflect.ValueOf(p).Elem(); v.Len() == 0 {
				v.SetZero()
			}
		}
	}
	var diffs []string
	diffFields("", reflect.ValueOf(*documented), reflect.ValueOf(*def), &diffs)
	for _, d := range diffs {
		t.Errorf("README's configuration reference differs from the default: %s", d)
	}
}

func diffFields(path string, a, b reflect.Value, out *[]string) {
	if a.Kind() == reflect.Struct {
		for i := range a.NumField() {
			tag := strings.Split(a.Type().Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" {
				continue // not a key (Config.unread)
			}
			diffFields(join(path, tag), a.Field(i), b.Field(i), out)
		}
		return
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		*out = append(*out, path+": README "+fmtValue(a)+", default "+fmtValue(b))
	}
}

func fmtValue(v reflect.Value) string { return fmt.Sprint(v.Interface()) }

// Every example configuration shipped in examples/ loads and validates.
func TestExampleConfigsValidate(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples/*.yaml: %v", err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := FromYAML(data)
		if cfg != nil {
			err = errors.Join(err, cfg.Validate())
		}
		if err != nil {
			t.Errorf("%s does not validate:\n%v", p, err)
		}
	}
}

// README: "Not built: models and transform mode on Iceberg (validation
// says so)". merge.models on the iceberg sink is refused by name, and
// merge.every there gets one error, not two.
func TestIcebergModelsRefusedByValidationOnce(t *testing.T) {
	model := "merge: {models: [{name: spans, key: [id], columns: {id: {path: $.id, type: VARCHAR}}}]}\n"
	for yaml, want := range map[string]string{
		model:                   "merge.models: ",
		"merge: {every: 30s}\n": "merge.every: ",
		"merge: {every: 30s, models: [{name: spans, key: [id], columns: {id: {path: $.id, type: VARCHAR}}}]}\n": "merge.models: ",
	} {
		cfg, err := FromYAML([]byte("kafka: {topics: [t]}\nsink: {type: iceberg}\n" + yaml))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on iceberg: got %v, want an error naming %s", strings.TrimSpace(yaml), err, want)
			continue
		}
		for _, key := range []string{"merge.models: ", "merge.every: "} {
			if n := strings.Count(err.Error(), key); n > 1 {
				t.Errorf("%s on iceberg: %d errors for %s, want one:\n%v", strings.TrimSpace(yaml), n, strings.TrimSuffix(key, ": "), err)
			}
		}
	}
}
