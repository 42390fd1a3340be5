package cdc

import (
	"fmt"
	"regexp"
	"strings"
)

// Format is the shape of the change events on a topic.
type Format string

// The formats a Decoder reads.
const (
	// FormatDebezium is Debezium's JSON (JsonConverter), with the schema
	// wrapper (schemas.enable=true) or without, from its MySQL and
	// PostgreSQL connectors.
	FormatDebezium Format = "debezium"
	// FormatCanal is Canal's flat message (canal.mq.flatMessage=true).
	FormatCanal Format = "canal"
	// FormatMaxwell is Maxwell's JSON.
	FormatMaxwell Format = "maxwell"
)

// The default table-name templates (Options.LogTemplate, ModelTemplate).
const (
	DefaultLogTemplate   = "cdc_{database}_{table}_log"
	DefaultModelTemplate = "cdc_{database}_{table}"
)

// Options configure a Decoder.
type Options struct {
	// Format of the events; required.
	Format Format
	// LogTemplate names a source table's changelog table, ModelTemplate
	// its modelled table; "" for the defaults. {database}, {schema} and
	// {table} stand for the logical table's names (after Shards), each
	// sanitised (see Table.Log); the rest of a template must be lowercase
	// [a-z0-9_], and it must hold {table}. {schema} is "" outside
	// PostgreSQL; with PostgreSQL and a template without {schema},
	// same-named tables of two schemas collide (Decode reports it).
	LogTemplate, ModelTemplate string
	// Shards map physical tables to logical ones, the first match winning:
	// order_00..order_63 to order.
	Shards []Shard
	// UnavailablePlaceholder is Debezium's unavailable.value.placeholder
	// as the connector is configured ("hex:" and octets, or text); "" is
	// Debezium's default, __debezium_unavailable_value. A column of an
	// update, a create (of an update that changed the primary key) or a
	// delete holding it is Column.Unavailable; a snapshot read or a key
	// column holding it is refused: no earlier change gives its value.
	// Changes of a MySQL or MariaDB connector never hold it.
	UnavailablePlaceholder string
}

// Shard maps the source tables it matches to one logical table.
type Shard struct {
	// Database and Table are regular expressions (RE2) that must match the
	// whole source database and table name; "" matches any. With
	// PostgreSQL, Database matches the database, not the schema.
	Database, Table string
	// AsDatabase and AsTable are the logical names; "" keeps the source's.
	AsDatabase, AsTable string
}

type shard struct {
	db, table     *regexp.Regexp
	asDB, asTable string
}

// template is a parsed table-name template: literal text between the
// placeholders.
type template struct {
	parts []templatePart
}

type templatePart struct {
	literal string
	field   int // fieldNone, or which name stands here
}

const (
	fieldNone = iota
	fieldDatabase
	fieldSchema
	fieldTable
)

var placeholders = map[string]int{"{database}": fieldDatabase, "{schema}": fieldSchema, "{table}": fieldTable}

func parseTemplate(s string) (template, error) {
	var t template
	hasTable := false
	for rest := s; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			open = len(rest)
		}
		if lit := rest[:open]; lit != "" {
			if i := strings.IndexFunc(lit, func(r rune) bool { return !isIdentByte(r) }); i >= 0 {
				return template{}, fmt.Errorf("template %q: %q is not lowercase a-z, 0-9 or _", s, lit[i:i+1])
			}
			t.parts = append(t.parts, templatePart{literal: lit})
		}
		rest = rest[open:]
		if rest == "" {
			break
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return template{}, fmt.Errorf("template %q: { without }", s)
		}
		f, ok := placeholders[rest[:end+1]]
		if !ok {
			return template{}, fmt.Errorf("template %q: unknown placeholder %s, want {database}, {schema} or {table}", s, rest[:end+1])
		}
		hasTable = hasTable || f == fieldTable
		t.parts = append(t.parts, templatePart{field: f})
		rest = rest[end+1:]
	}
	if !hasTable {
		// Without it every table of a database would share one name.
		return template{}, fmt.Errorf("template %q: must hold {table}", s)
	}
	return t, nil
}

func isIdentByte(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' }

// expand fills the template with the sanitised names.
func (t template) expand(names [fieldTable + 1]string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.field == fieldNone {
			b.WriteString(p.literal)
		} else {
			b.WriteString(sanitize(names[p.field]))
		}
	}
	return b.String()
}

func compileShards(in []Shard) ([]shard, error) {
	out := make([]shard, 0, len(in))
	for i, s := range in {
		var sh shard
		var err error
		if sh.db, err = anchored(s.Database); err != nil {
			return nil, fmt.Errorf("shards[%d].database: %w", i, err)
		}
		if sh.table, err = anchored(s.Table); err != nil {
			return nil, fmt.Errorf("shards[%d].table: %w", i, err)
		}
		sh.asDB, sh.asTable = s.AsDatabase, s.AsTable
		out = append(out, sh)
	}
	return out, nil
}

// anchored compiles a pattern that must match a whole name; nil for "".
func anchored(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	return regexp.Compile(`^(?:` + expr + `)$`)
}

func (s *shard) matches(db, table string) bool {
	return (s.db == nil || s.db.MatchString(db)) && (s.table == nil || s.table.MatchString(table))
}
