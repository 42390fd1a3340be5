package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Merge configures the modelled tables that `tracelake merge` builds from
// the raw table, incrementally.
type Merge struct {
	// Every makes `tracelake run` merge every model on this schedule in the
	// background; 0 (default) leaves merging to `tracelake merge`.
	Every Duration `yaml:"every"`
	// Concurrency is how many changelog models (kafka.format debezium,
	// canal or maxwell: one per source table, thousands of them) merge at
	// once, each in its own transaction. Default 2; 1 merges one after
	// another.
	Concurrency int     `yaml:"concurrency"`
	Models      []Model `yaml:"models"`
}

// DefaultMergeConcurrency is merge.concurrency's default: measured on 2
// cores, two merges at once take a round of small changelog merges in
// ~0.7 of the time one at a time does, three in ~0.6 (a merge is mostly
// statements' fixed costs, on one core each).
const DefaultMergeConcurrency = 2

// maxMergeConcurrency bounds merge.concurrency: each merge holds a
// connection and DuckDB's memory for its increment.
const maxMergeConcurrency = 64

// MergeConcurrency is merge.concurrency, its default filled in.
func (c *Config) MergeConcurrency() int { return cmp.Or(c.Merge.Concurrency, DefaultMergeConcurrency) }

// Model is one modelled table: rows projected from the raw table's JSON,
// the latest change per key merged into Target.
type Model struct {
	Name string `yaml:"name"`
	// Target is the table the model maintains; default the model's name.
	Target string `yaml:"target"`
	// Source is the raw table read; default sink.table.
	Source string `yaml:"source"`
	// Format is json (raw_data is the row) or debezium (raw_data is a
	// Debezium change event, with or without the schema wrapper).
	Format string `yaml:"format"`
	// Key are the business-key columns, some of Columns.
	Key     []string `yaml:"key"`
	Columns Columns  `yaml:"columns"`
	// Action optionally says which changes delete or only insert (json
	// format; Debezium's op plays this part for debezium).
	Action Action `yaml:"action,omitempty"`
	// Version optionally names a column ordering the changes of a key: an
	// older change never overwrites a newer one. Without it the change with
	// the highest Kafka offset wins.
	Version string `yaml:"version,omitempty"`
}

// Model formats.
const (
	FormatJSON     = "json"
	FormatDebezium = "debezium"
)

// Action maps the values of a JSON field to what a change does. A value in
// Delete deletes the key's row; in Insert, inserts it only if absent (a
// replayed insert never overwrites); any other value upserts.
type Action struct {
	Path   string   `yaml:"path,omitempty"`
	Delete []string `yaml:"delete,omitempty"`
	Insert []string `yaml:"insert,omitempty"`
}

// Column is a target column: a JSON path into the row and a SQL type.
type Column struct {
	Name string
	Path string // $.a.b
	Type string // a DuckDB (or Databend) type: VARCHAR, BIGINT, TIMESTAMP, JSON …
}

// Columns keep the order in which the config lists them (the target's
// column order): `name: {path: $.x, type: VARCHAR}` entries of a mapping.
type Columns []Column

// UnmarshalYAML reads the mapping in order, rejecting unknown keys and
// a column given twice (YAML forbids it; kept, both went into the
// target's CREATE TABLE, which failed at every merge). The columns read
// are kept even when some are in error, so that validation does not
// report the model as having none, or its key as not among them, for a
// typo in one column.
func (cs *Columns) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping of column: {path: $.field, type: TYPE}")
	}
	out := Columns{}
	var problems []string
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, spec := n.Content[i].Value, resolveAlias(n.Content[i+1])
		if line, dup := lines[name]; dup {
			problems = append(problems, fmt.Sprintf("%s: defined twice (lines %d, %d): give each column once", name, line, n.Content[i].Line))
			continue
		}
		lines[name] = n.Content[i].Line
		if spec.Kind != yaml.MappingNode {
			problems = append(problems, fmt.Sprintf("%s: want {path: $.field, type: TYPE}", name))
			continue
		}
		c := Column{Name: name}
		for j := 0; j+1 < len(spec.Content); j += 2 {
			switch k, v := spec.Content[j].Value, resolveAlias(spec.Content[j+1]).Value; k {
			case "path":
				c.Path = v
			case "type":
				c.Type = v
			default:
				problems = append(problems, fmt.Sprintf("%s.%s: unknown key (accepted: path, type)", name, k))
			}
		}
		out = append(out, c)
	}
	*cs = out
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// resolveAlias is the node an alias (*name) stands for, n itself otherwise.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// MarshalYAML writes the mapping back in order (for `tracelake config`).
func (cs Columns) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, c := range cs {
		spec := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		spec.Content = append(spec.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: "path"}, &yaml.Node{Kind: yaml.ScalarNode, Value: c.Path},
			&yaml.Node{Kind: yaml.ScalarNode, Value: "type"}, &yaml.Node{Kind: yaml.ScalarNode, Value: c.Type})
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: c.Name}, spec)
	}
	return n, nil
}

// Lookup returns the named column.
func (cs Columns) Lookup(name string) (Column, bool) {
	i := slices.IndexFunc(cs, func(c Column) bool { return c.Name == name })
	if i < 0 {
		return Column{}, false
	}
	return cs[i], true
}

// WithDefaults fills what a model leaves out: target = name, source = the
// raw table, format json, delete/insert action values.
func (m Model) WithDefaults(rawTable string) Model {
	if m.Target == "" {
		m.Target = m.Name
	}
	if m.Source == "" {
		m.Source = rawTable
	}
	if m.Format == "" {
		m.Format = FormatJSON
	}
	if m.Action.Path != "" && m.Action.Delete == nil {
		m.Action.Delete = []string{"delete"}
	}
	if m.Action.Path != "" && m.Action.Insert == nil {
		m.Action.Insert = []string{"insert"}
	}
	return m
}

// Models returns merge.models, each with its defaults filled in.
func (c *Config) Models() []Model {
	out := make([]Model, len(c.Merge.Models))
	for i, m := range c.Merge.Models {
		out[i] = m.WithDefaults(c.Sink.Table)
	}
	return out
}

// Model returns the model called name, with defaults.
func (c *Config) Model(name string) (Model, error) {
	for _, m := range c.Models() {
		if m.Name == name {
			return m, nil
		}
	}
	if len(c.Merge.Models) == 0 {
		return Model{}, fmt.Errorf("no model %q: merge.models has none", name)
	}
	names := make([]string, len(c.Merge.Models))
	for i, m := range c.Merge.Models {
		names[i] = m.Name
	}
	return Model{}, fmt.Errorf("no model %q in merge.models (configured: %s)", name, strings.Join(names, ", "))
}

var (
	// $.a.b, $.list[0], and $."gen_ai.usage.input_tokens" for keys that
	// are not plain names (OpenTelemetry attribute keys hold dots).
	jsonPath = regexp.MustCompile(`^\$(\.[A-Za-z_][A-Za-z0-9_]*|\."[^"\\]+"|\[[0-9]+\])*$`)
	sqlType  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*( ?\([0-9, ]+\))?(\[\])?$`)
)

// wildcardKey says whether path (a jsonPath) quotes the key "*". DuckDB's
// JSON path reader takes that key, quoted or not, for a wildcard
// (extension/json/json_common.cpp: JSONKeyReadResult.IsWildCard compares
// the key read with "*"), and has no escape for it: a merge, which
// extracts every column's path in one call, fails on every run ("Cannot
// have wildcards in JSON path when supplying multiple paths"), while
// Databend reads the field. A quoted key holds no quote (jsonPath), so
// the text ."*" is that key.
func wildcardKey(path string) bool { return strings.Contains(path, `."*"`) }

func (m *Merge) validate(check func(ok bool, key, format string, args ...any)) {
	check(m.Every.D() >= 0 && m.Every.D() <= 24*time.Hour, "merge.every", "want 0 (off) to 24h, got %s", m.Every)
	check(m.Concurrency >= 0 && m.Concurrency <= maxMergeConcurrency, "merge.concurrency", "want 1 to %d merges at once (0: the default, %d), got %d",
		maxMergeConcurrency, DefaultMergeConcurrency, m.Concurrency)
	seen := map[string]bool{}
	for i, mo := range m.Models {
		key := func(k string) string { return fmt.Sprintf("merge.models[%d].%s", i, k) }
		check(identifier.MatchString(mo.Name) && !strings.Contains(mo.Name, "."), key("name"),
			"want a name of letters, digits and _, got %q", mo.Name)
		check(!seen[mo.Name], key("name"), "model %q is defined twice", mo.Name)
		seen[mo.Name] = true
		check(mo.Target == "" || identifier.MatchString(mo.Target), key("target"), "want a table name, got %q", mo.Target)
		check(mo.Source == "" || identifier.MatchString(mo.Source), key("source"), "want a table name, got %q", mo.Source)
		check(mo.Format == "" || mo.Format == FormatJSON || mo.Format == FormatDebezium, key("format"),
			"want json or debezium, got %q", mo.Format)
		check(len(mo.Columns) > 0, key("columns"), "at least one column {path: $.field, type: TYPE} is required")
		for _, c := range mo.Columns {
			ck := key("columns." + c.Name)
			check(identifier.MatchString(c.Name) && !strings.Contains(c.Name, ".") && !strings.HasPrefix(c.Name, "tl_"), ck,
				"want a column name of letters, digits and _ (not starting with tl_)")
			check(jsonPath.MatchString(c.Path), ck+".path", "want a JSON path like $.field.sub, $.list[0] or $.attributes.\"key.with.dots\", got %q", c.Path)
			check(!wildcardKey(c.Path), ck+".path", `the key "*" (in %s) is a wildcard to DuckDB's JSON functions, which cannot address a field so named`, c.Path)
			check(sqlType.MatchString(c.Type), ck+".type", "want a SQL type like VARCHAR, BIGINT, DECIMAL(38,9), TIMESTAMP or JSON, got %q", c.Type)
		}
		check(len(mo.Key) > 0, key("key"), "at least one key column is required")
		for _, k := range mo.Key {
			_, ok := mo.Columns.Lookup(k)
			check(ok, key("key"), "%q is not one of the model's columns", k)
		}
		if mo.Version != "" {
			_, ok := mo.Columns.Lookup(mo.Version)
			check(ok, key("version"), "%q is not one of the model's columns", mo.Version)
		}
		if mo.Action.Path != "" || mo.Action.Delete != nil || mo.Action.Insert != nil {
			check(mo.Format != FormatDebezium, key("action"), "not used with format debezium (its op says what a change does)")
			check(jsonPath.MatchString(mo.Action.Path), key("action.path"), "want a JSON path like $.action, got %q", mo.Action.Path)
			check(!wildcardKey(mo.Action.Path), key("action.path"), `the key "*" (in %s) is a wildcard to DuckDB's JSON functions, which cannot address a field so named`, mo.Action.Path)
			// An empty list is not "none": it would be merged as `IN ()`,
			// a syntax error on DuckDB and Databend, and an absent key
			// means the default (WithDefaults), which an empty list written
			// back by `tracelake config` (omitempty) would silently become.
			check(mo.Action.Delete == nil || len(mo.Action.Delete) > 0, key("action.delete"),
				"want at least one value of the action field (leave the key out for the default, [delete])")
			check(mo.Action.Insert == nil || len(mo.Action.Insert) > 0, key("action.insert"),
				"want at least one value of the action field (leave the key out for the default, [insert])")
		}
	}
}
