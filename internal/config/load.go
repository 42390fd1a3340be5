package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment override: kafka.brokers is
// TRACELAKE_KAFKA_BROKERS, batch.max_bytes is TRACELAKE_BATCH_MAX_BYTES.
const EnvPrefix = "TRACELAKE_"

// FromFile reads the file at path over Default (YAML, or the reference tool's JSON
// file when the content is a JSON object with its keys), then applies
// TRACELAKE_* environment overrides, then overrides (a command's flags).
// The defaults that follow from other keys (otlp.mode from the Kafka keys)
// are filled in last, from all three. An empty path loads defaults and
// the environment only. Every problem found is returned, joined, one per
// key, with the config as far as it could be read (nil only when the file
// could not be read), so the caller can add Validate's findings to the
// report.
func FromFile(path string, overrides ...func(*Config)) (*Config, error) {
	cfg := Default()
	var fileErr error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		fileErr = decodeFile(cfg, path, data)
	}
	envErr := applyEnv(cfg, os.LookupEnv)
	for _, o := range overrides {
		o(cfg)
	}
	cfg.settle()
	return cfg, errors.Join(fileErr, envErr)
}

// FromYAML reads YAML text over Default, without the environment (for
// configurations shipped inside the binary).
func FromYAML(data []byte) (*Config, error) {
	cfg := Default()
	err := decodeFile(cfg, "(embedded).yaml", data)
	cfg.settle()
	return cfg, err
}

func decodeFile(cfg *Config, path string, data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if strings.EqualFold(filepath.Ext(path), ".json") && looksLikeReference(trimmed) {
		return decodeReference(cfg, trimmed)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	if len(root.Content) == 0 {
		return nil // an empty file means all defaults
	}
	var errs []error
	decodeNode(root.Content[0], reflect.ValueOf(cfg).Elem(), "", &errs)
	return errors.Join(errs...)
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
)

// decodeNode decodes n into v key by key, so that every error carries the key
// path and unknown keys are reported with the keys accepted in their place.
func decodeNode(n *yaml.Node, v reflect.Value, path string, errs *[]error) {
	if v.Kind() == reflect.Struct && !reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, fmt.Errorf("%s: want a mapping of keys, got %q", orRoot(path), n.Value))
			return
		}
		fields := yamlFields(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			idx, ok := fields[key]
			if !ok {
				*errs = append(*errs, fmt.Errorf("%s: unknown key (accepted: %s)", join(path, key), acceptedKeys(fields)))
				continue
			}
			decodeNode(n.Content[i+1], v.Field(idx), join(path, key), errs)
		}
		return
	}
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct && !reflect.PointerTo(v.Type()).Implements(yamlUnmarshaler) {
		// A list of sections (merge.models): each item key by key.
		if n.Kind != yaml.SequenceNode {
			*errs = append(*errs, fmt.Errorf("%s: want a list", orRoot(path)))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
		for i, item := range n.Content {
			decodeNode(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i), errs)
		}
		return
	}
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		// Allow "a,b" for lists, as in the environment.
		v.Set(splitList(n.Value, v.Type()))
		return
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, cleanYAMLError(err)))
	}
}

func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			m[tag] = i
		}
	}
	return m
}

func acceptedKeys(fields map[string]int) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// cleanYAMLError drops yaml's "yaml: unmarshal errors:\n  line N:" wrapping
// and keeps the reason.
func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n")
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ": "); strings.HasPrefix(s, "line ") && i > 0 {
		s = s[i+2:]
	}
	return s
}

func splitList(s string, t reflect.Type) reflect.Value {
	out := reflect.MakeSlice(t, 0, 4)
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = reflect.Append(out, reflect.ValueOf(part))
		}
	}
	return out
}

// applyEnv sets every leaf key whose TRACELAKE_* variable is present.
func applyEnv(cfg *Config, lookup func(string) (string, bool)) error {
	var errs []error
	walkLeaves(reflect.ValueOf(cfg).Elem(), "", func(path string, _ reflect.StructField, v reflect.Value) {
		name := EnvName(path)
		s, ok := lookup(name)
		if !ok {
			return
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String {
			v.Set(splitList(s, v.Type()))
			return
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) == 0 {
			n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
		} else {
			n = *n.Content[0]
		}
		if v.Kind() == reflect.String {
			// Keep the text as given: "0123" or "true" stay strings.
			v.SetString(s)
			return
		}
		if v.Kind() == reflect.Slice {
			// A list of sections, as YAML flow text: [{name: m, …}].
			var errsHere []error
			decodeNode(&n, v, path+" (from "+name+")", &errsHere)
			errs = append(errs, errsHere...)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			errs = append(errs, fmt.Errorf("%s (from %s): %s", path, name, cleanYAMLError(err)))
		}
	})
	return errors.Join(errs...)
}

// EnvName is the environment variable that overrides a key path.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// walkLeaves calls fn for every non-struct field (or TextUnmarshaler struct)
// with its key path and struct field.
func walkLeaves(v reflect.Value, path string, fn func(string, reflect.StructField, reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		f := v.Field(i)
		p := join(path, tag)
		if f.Kind() == reflect.Struct && !reflect.PointerTo(f.Type()).Implements(textUnmarshaler) {
			walkLeaves(f, p, fn)
			continue
		}
		fn(p, t.Field(i), f)
	}
}
