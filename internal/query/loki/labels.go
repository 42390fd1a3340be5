package loki

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// indexed are the resource attributes that become stream labels, dots
// made underscores (Loki's defaults, pkg/loghttp/push/otlp_config.go
// DefaultOTLPResourceAttributesAsIndexLabels); every other resource
// attribute is structured metadata, as in Loki's OTLP ingestion
// (pkg/loghttp/push/otlp.go). service.name is the service_name column.
var indexed = []string{
	"service.namespace", "service.instance.id", "deployment.environment", "deployment.environment.name",
	"cloud.region", "cloud.availability_zone", "k8s.cluster.name", "k8s.namespace.name", "k8s.pod.name",
	"k8s.container.name", "container.name", "k8s.replicaset.name", "k8s.deployment.name",
	"k8s.statefulset.name", "k8s.daemonset.name", "k8s.cronjob.name", "k8s.job.name",
}

// Names of the stream labels that are not resource attributes.
const (
	serviceLabel = "service_name"
	// levelLabel is the level as Loki's distributor detects it
	// (levelSQL). Loki
	// keeps it as structured metadata; here it is a stream label, so
	// that a selector on it reaches the table's severity columns and the
	// labels API lists it for Grafana's level filters.
	levelLabel = "detected_level"
	// unknownService is service_name when the resource names none (Loki
	// service name discovery's default).
	unknownService = "unknown_service"
	// tenantLabel is each stream's tenant in an operator's read of every
	// tenant, as Loki's multi-tenant querier labels every stream of a
	// read of several tenants (pkg/querier/multi_tenant_querier.go
	// defaultTenantLabel, relabel) and Prometheus's API here labels
	// series (prom's tenantLabel): two tenants' streams of the same
	// labels stay two. A tenant's own read has no such label.
	tenantLabel = "__tenant_id__"
)

// labelName is an attribute's name as a label, as Loki's OTLP ingestion
// names it (pkg/loghttp/push/otlp.go attributeToLabels:
// otlptranslator.NormalizeLabel): each character (a rune, not a byte)
// that is no ASCII letter or digit becomes _, then a name starting with
// a digit is prefixed key_, one starting with a single _ key.
func labelName(attr string) string {
	if attr == "" {
		return attr
	}
	var b strings.Builder
	b.Grow(len(attr))
	for _, r := range attr {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	switch {
	case name[0] >= '0' && name[0] <= '9':
		return "key_" + name
	case strings.HasPrefix(name, "_") && !strings.HasPrefix(name, "__"):
		return "key" + name
	}
	return name
}

// attrLabels appends the labels of an attributes JSON object's members,
// in their order: nested objects flattened with _, a nested key named
// joined to its parent's label name (Loki attributeToLabels:
// NormalizeLabel(prefix + "_" + k), so the 1 of m is m_1), arrays as
// their JSON. Names that normalize alike are each appended, the later
// last, as Loki's label builder sets them (dedupe keeps it).
func attrLabels(dst logql.Labels, prefix string, obj []member, cat logql.Category, skip func(string) bool) logql.Labels {
	for _, m := range obj {
		if skip != nil && skip(m.key) {
			continue
		}
		name := m.key
		if prefix != "" {
			name = prefix + "_" + m.key
		}
		name = labelName(name)
		if len(m.raw) > 0 && m.raw[0] == '{' {
			if inner, ok := members(m.raw); ok {
				dst = attrLabels(dst, name, inner, cat, nil)
				continue
			}
		}
		dst = append(dst, logql.Label{Name: name, Value: jsonValue(m.raw), Cat: cat})
	}
	return dst
}

// member is one of a JSON object's members.
type member struct {
	key string
	raw json.RawMessage
}

// members reads a JSON object's members in the object's order (the
// attributes' order as received), and whether data is one: a Go map
// would lose the order, which decides between attributes whose names
// normalize alike.
func members(data []byte) ([]member, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, false
		}
		k, _ := tok.(string)
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, false
		}
		out = append(out, member{k, raw})
	}
	return out, true
}

// jsonValue is an attribute value as text, as Loki's OTLP ingestion
// writes a label's value: pdata's AsString (pkg/loghttp/push/otlplabels/
// labels.go AttributeToLabels). Strings unquoted, ints and bools as
// written; a double as AsString writes it, whole without .0 (the column
// holds 2.0, so that it reads back a double; Loki's label is 2), and
// arrays as the JSON of their values, doubles so too.
func jsonValue(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	case 'n':
		return ""
	case 't', 'f':
		return string(raw)
	}
	if isInteger(raw) {
		return string(raw)
	}
	v, err := otel.ValueFromJSON(raw)
	if err != nil {
		return string(raw)
	}
	return v.AsString()
}

// isInteger is whether raw is a JSON integer: an int attribute, whose
// text is AsString's.
func isInteger(raw []byte) bool {
	if len(raw) > 0 && raw[0] == '-' {
		raw = raw[1:]
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(raw) > 0
}

func isIndexed(attr string) bool {
	for _, a := range indexed {
		if a == attr {
			return true
		}
	}
	return attr == "service.name"
}

// discovered are the resource attributes whose stream labels Loki's
// service name discovery takes service_name from when the resource has
// no service.name, the first of them in the resource's order
// (serviceSQL): those of discover_service_name's
// default labels (pkg/validation/limits.go: …, container_name,
// k8s_container_name, …, k8s_job_name) that are stream labels here
// (pkg/loghttp/push/otlplabels/labels.go ResourceAttrsToStreamLabels).
var discovered = []string{"container.name", "k8s.container.name", "k8s.job.name"}

// streamLabels are a row's stream labels: service_name (service, as
// serviceSQL reads it), detected_level
// and the indexed resource attributes, and tenantLabel when tenant is not
// "" (an operator's read of every tenant).
func streamLabels(service string, res map[string]json.RawMessage, level, tenant string) logql.Labels {
	ls := logql.Labels{{Name: serviceLabel, Value: service}, {Name: levelLabel, Value: level}}
	if tenant != "" {
		ls = append(ls, logql.Label{Name: tenantLabel, Value: tenant})
	}
	for _, a := range indexed {
		if raw, ok := res[a]; ok {
			if v := jsonValue(raw); v != "" {
				ls = append(ls, logql.Label{Name: labelName(a), Value: v})
			}
		}
	}
	return ls.Sort()
}

// levelSQL is a record's detected_level, as Loki's distributor detects
// it (pkg/distributor/field_detection.go extractLogLevel): from its
// severity text when it names a level (the OTLP ingestion writes the
// text as the structured metadata severity_text, one of Loki's level
// fields, which extractLogLevel reads before the severity number:
// OpenTelemetry Python sends a CRITICAL record as CRITICAL, FATAL, and
// Loki's level is critical), else from its severity number's range
// (detectLogLevelFromLogEntry), else from its line
// (extractLogLevelFromLogLine): a JSON line's first level field, a
// logfmt line's level field by the priority of Loki's default level
// fields, else the first level word standing on its own in the line,
// else unknown. It is computed in SQL only, and read as a column, so
// that a selector on detected_level and the labels a query answers
// agree. Unlike Loki: a severity text that names no level does not
// become the level (Loki keeps such a text as it is; here the number
// decides), a record attribute named level is not read, and a JSON level
// field is found at any depth, arrays included.
var levelSQL = `coalesce(` + levelOf(`severity_text`) + `, CASE WHEN severity_number > 0 THEN CASE WHEN severity_number <= 4 THEN 'trace' WHEN severity_number <= 8 THEN 'debug'
	WHEN severity_number <= 12 THEN 'info' WHEN severity_number <= 16 THEN 'warn' WHEN severity_number <= 20 THEN 'error'
	WHEN severity_number <= 24 THEN 'fatal' ELSE 'unknown' END END, ` + lineLevelSQL(lineSQL) + `)`

// levelWords are the names of levels in the texts that state one, and
// the level each names (Loki's normalizeLogLevel).
var levelWords = [][2]string{
	{"trace", "trace"}, {"trc", "trace"}, {"debug", "debug"}, {"dbg", "debug"}, {"info", "info"}, {"inf", "info"},
	{"information", "info"}, {"warn", "warn"}, {"wrn", "warn"}, {"warning", "warn"}, {"error", "error"}, {"err", "error"},
	{"critical", "critical"}, {"fatal", "fatal"},
}

// levelOf is the SQL of the level a text names, NULL when it names none.
func levelOf(text string) string {
	var b strings.Builder
	b.WriteString("CASE lower(" + text + ")")
	for _, w := range levelWords {
		b.WriteString(" WHEN '" + w[0] + "' THEN '" + w[1] + "'")
	}
	b.WriteString(" END")
	return b.String()
}

// logfmtLevelFields are Loki's default level fields
// (pkg/validation/limits.go DefaultAllowedLevelFields) as a logfmt line
// is searched for them: by name regardless of case, in this order.
var logfmtLevelFields = []string{"level", `log\.level`, "severity", "severitytext", "lvl", "severity_text"}

// jsonLevelFields are the names of the level fields of a JSON line.
var jsonLevelFields = []string{"level", "LEVEL", "Level", "log.level", "severity", "SEVERITY", "Severity", "SeverityText",
	"lvl", "LVL", "Lvl", "severity_text", "Severity_Text", "SEVERITY_TEXT"}

// bodyLevelFieldSQL is the first level field of a map body's line, whose
// string value it is, NULL for none. The line is the body's AsString
// (structuredLine), each map's keys sorted, not the table's JSON in the
// order received: Loki's distributor goes through the line's maps depth
// first, into objects and not arrays, two levels deep by default
// (pkg/distributor/field_detection.go getLevelUsingJSONParser,
// jsonparser.ObjectEach; pkg/validation/limits.go
// log_level_from_json_max_depth: 2), so it meets the fields in the
// sorted order of their keys, a nested map's between its key's
// neighbours.
var bodyLevelFieldSQL = func() string {
	var names []string
	for _, f := range jsonLevelFields {
		names = append(names, sqltext.String(f))
	}
	in := `IN (` + strings.Join(names, ", ") + `)`
	// pointer is the JSON pointer of key under the pointer parent.
	pointer := func(parent, key string) string {
		return parent + ` || '/' || replace(replace(` + key + `, '~', '~0'), '/', '~1')`
	}
	first := func(list string) string { return `list_filter(` + list + `, lambda x: x IS NOT NULL)[1]` }
	field := func(p, key string) string {
		return `CASE WHEN ` + key + ` ` + in + ` AND json_type(body, ` + p + `) = 'VARCHAR' THEN json_extract_string(body, ` + p + `) END`
	}
	p1, p2 := pointer("''", "k1"), pointer(pointer("''", "k1"), "k2")
	nested := first(`list_transform(list_sort(json_keys(body, ` + p1 + `)), lambda k2: ` + field(p2, "k2") + `)`)
	return first(`list_transform(list_sort(json_keys(body)), lambda k1: coalesce(` + field(p1, "k1") +
		`, CASE WHEN json_type(body, ` + p1 + `) = 'OBJECT' THEN ` + nested + ` END))`)
}()

// lineLevelSQL is the SQL of the level line states, unknown when none.
func lineLevelSQL(line string) string {
	// The JSON level fields, each in every case Loki lists; the first
	// in the line whose value is a string.
	// A map body's field is named once, as a lambda's argument:
	// levelOf compares its text with each level word, and DuckDB binds
	// and plans the expression once for each (bodyLevelFieldSQL written
	// in full in each made every query of the logs ~1.5x slower to plan).
	json := `CASE WHEN json_type(body, '$') = 'OBJECT' THEN list_transform([` + bodyLevelFieldSQL + `], lambda v: ` + levelOf("v") + `)[1]` +
		` ELSE ` + levelOf(`regexp_extract(`+line+`, '"(?:`+
		strings.ReplaceAll(strings.Join(jsonLevelFields, "|"), ".", `\.`)+`)"\s*:\s*"([^"]*)"', 1)`) + ` END`
	var logfmt []string
	for _, f := range logfmtLevelFields {
		logfmt = append(logfmt, levelOf(`regexp_extract(`+line+`, '(?i)(?:^|\s)`+f+`="?([^"\s]*)', 1)`))
	}
	// The first level word with a boundary on each side (Loki's
	// isLeftWordBoundary and isRightWordBoundary); at one place, the
	// words in Loki's order of levelPatterns.
	words := `regexp_extract(lower(` + line + `), '(?:^|[ \t\n\[({"''=|])(trace|debug|fatal|critical|error|err|warning|warn|info)(?:$|[ \t\n\[\](){}:,!"''=|])', 1)`
	return `coalesce(CASE WHEN regexp_matches(` + line + `, '^\s*\{(?s:.*)\}\s*$') THEN ` + json +
		` WHEN contains(` + line + `, '=') THEN coalesce(` + strings.Join(logfmt, ", ") + `) END, ` + levelOf(words) + `, 'unknown')`
}

// row is what a query reads of a log record.
type row struct {
	ts                       int64
	line                     string
	service                  string
	resource, scope, attrs   string // JSON objects
	scopeName, scopeVersion  string
	severityText             string
	severityNumber           int32
	traceID, spanID          string
	flags, droppedAttributes int64
	level                    string // detected_level (levelSQL)
	tenant                   string // an operator's read of every tenant only (tenantSQL)
	structured               bool   // a map or array body: line is its JSON as the table holds it (structuredSQL)
	eventName                string
	observed                 int64 // observed_timestamp (observedSQL), 0 for none
}

// metadata is a row's structured metadata, as Loki's OTLP ingestion
// makes it (pkg/loghttp/push/otlp.go otlpLogToPushEntry): the resource
// attributes that are not stream labels, the scope's name, version and
// attributes, the record's attributes, its severity, trace and span ids,
// its flags and dropped attributes when not zero, its event name when
// not empty and its observed time when it has a time too
// (pkg/loghttp/push/otlplabels/labels.go LogAttrsToLabels).
func (r *row) metadata(res []member, cache metadataCache) logql.Labels {
	base := cache.base(r, res)
	if r.traceID == "" && r.spanID == "" && r.observed == 0 {
		return base
	}
	// The fields of each record its own, past the cache.
	md := slices.Clone(base)
	observed := ""
	if r.observed != 0 {
		observed = strconv.FormatInt(r.observed, 10)
	}
	for _, l := range []logql.Label{{Name: "trace_id", Value: r.traceID}, {Name: "span_id", Value: r.spanID}, {Name: "observed_timestamp", Value: observed}} {
		if l.Value != "" {
			l.Cat = logql.CatMetadata
			md = append(md, l)
		}
	}
	return dedupe(md.Sort())
}

// metadataKey is what a row's structured metadata but its ids come from.
type metadataKey struct {
	res, scope, attrs, scopeName, scopeVersion, severityText, eventName string
	severityNumber                                                      int32
	flags, dropped                                                      int64
}

// metadataCache keeps the structured metadata of a query's rows but
// their trace and span ids: rows of a service share their attributes
// far more often than not, and reading the JSON is most of the cost of
// a row.
type metadataCache map[metadataKey]logql.Labels

// maxCached bounds a metadataCache: past it, the cache starts again.
const maxCached = 10000

func (c metadataCache) base(r *row, res []member) logql.Labels {
	k := metadataKey{r.resource, r.scope, r.attrs, r.scopeName, r.scopeVersion, r.severityText, r.eventName, r.severityNumber, r.flags, r.droppedAttributes}
	if md, ok := c[k]; ok {
		return md
	}
	if len(c) >= maxCached {
		clear(c)
	}
	md := r.baseMetadata(res)
	c[k] = md
	return md
}

// baseMetadata is the structured metadata of a row but its ids.
func (r *row) baseMetadata(res []member) logql.Labels {
	var md logql.Labels
	md = attrLabels(md, "", res, logql.CatMetadata, isIndexed)
	add := func(name, v string) {
		if v != "" {
			md = append(md, logql.Label{Name: name, Value: v, Cat: logql.CatMetadata})
		}
	}
	add("scope_name", r.scopeName)
	add("scope_version", r.scopeVersion)
	for i, obj := range []string{r.scope, r.attrs} {
		if obj == "" || obj == "{}" {
			continue
		}
		var skip func(string) bool
		if i == 1 && r.eventName != "" {
			// The record's event name takes the place of an attribute
			// of its name (LogAttrsToLabels).
			skip = func(k string) bool { return k == "event_name" }
		}
		if m, ok := members([]byte(obj)); ok {
			md = attrLabels(md, "", m, logql.CatMetadata, skip)
		}
	}
	if r.severityNumber != 0 {
		add("severity_number", strconv.Itoa(int(r.severityNumber)))
	}
	add("severity_text", r.severityText)
	if r.droppedAttributes != 0 {
		add("dropped_attributes_count", strconv.FormatInt(r.droppedAttributes, 10))
	}
	if r.flags != 0 {
		add("flags", strconv.FormatInt(r.flags, 10))
	}
	add("event_name", r.eventName)
	return dedupe(md.Sort())
}

// dedupe keeps the last label of each name of sorted labels (a record's
// attribute wins over its resource's of the same name).
func dedupe(ls logql.Labels) logql.Labels {
	out := ls[:0]
	for i, l := range ls {
		if i+1 < len(ls) && ls[i+1].Name == l.Name {
			continue
		}
		out = append(out, l)
	}
	return out
}
