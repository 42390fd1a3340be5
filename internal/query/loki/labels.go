package loki

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query/logql"
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

// labelName is an attribute's name as a label: characters a label name
// may not hold become _ (Loki pkg/loghttp/push/otlp.go attributeToLabels,
// Prometheus's label name normalization).
func labelName(attr string) string {
	b := []byte(attr)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// attrLabels appends an attributes JSON object's labels: nested objects
// flattened with _ (Loki attributeToLabels), arrays as their JSON.
func attrLabels(dst logql.Labels, prefix string, obj map[string]json.RawMessage, cat logql.Category, skip func(string) bool) logql.Labels {
	for k, raw := range obj {
		if skip != nil && skip(k) {
			continue
		}
		name := labelName(k)
		if prefix != "" {
			name = prefix + "_" + name
		}
		if len(raw) > 0 && raw[0] == '{' {
			var inner map[string]json.RawMessage
			if json.Unmarshal(raw, &inner) == nil {
				dst = attrLabels(dst, name, inner, cat, nil)
				continue
			}
		}
		dst = append(dst, logql.Label{Name: name, Value: jsonValue(raw), Cat: cat})
	}
	return dst
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
// no service.name, in its order: those of discover_service_name's
// default labels (pkg/validation/limits.go: …, container_name,
// k8s_container_name, …, k8s_job_name) that are stream labels here
// (pkg/loghttp/push/otlplabels/labels.go ResourceAttrsToStreamLabels).
var discovered = []string{"container.name", "k8s.container.name", "k8s.job.name"}

// discoverService is the service_name of a resource without service.name:
// the first discovered attribute it has, else unknown_service.
func discoverService(res map[string]json.RawMessage) string {
	for _, a := range discovered {
		if raw, ok := res[a]; ok {
			if v := jsonValue(raw); v != "" {
				return v
			}
		}
	}
	return unknownService
}

// streamLabels are a row's stream labels: service_name, detected_level
// and the indexed resource attributes, and tenantLabel when tenant is not
// "" (an operator's read of every tenant).
func streamLabels(service string, res map[string]json.RawMessage, level, tenant string) logql.Labels {
	if service == "" {
		service = discoverService(res)
	}
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
// it (pkg/distributor/field_detection.go): from its severity number's
// range (detectLogLevelFromLogEntry), else from its severity text when
// it names a level, else from its line (extractLogLevelFromLogLine): a
// JSON line's first level field, a logfmt line's level field by the
// priority of Loki's default level fields, else the first level word
// standing on its own in the line, else unknown. It is computed in SQL
// only, and read as a column, so that a selector on detected_level and
// the labels a query answers agree. Unlike Loki: a severity text that
// names no level does not become the level (Loki keeps such a text as
// it is), a record attribute named level is not read, and a JSON level
// field is found at any depth, arrays included.
var levelSQL = `CASE WHEN severity_number > 0 THEN CASE WHEN severity_number <= 4 THEN 'trace' WHEN severity_number <= 8 THEN 'debug'
	WHEN severity_number <= 12 THEN 'info' WHEN severity_number <= 16 THEN 'warn' WHEN severity_number <= 20 THEN 'error'
	WHEN severity_number <= 24 THEN 'fatal' ELSE 'unknown' END
	ELSE coalesce(` + levelOf(`severity_text`) + `, ` + lineLevelSQL(lineSQL) + `) END`

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

// lineLevelSQL is the SQL of the level line states, unknown when none.
func lineLevelSQL(line string) string {
	// The JSON level fields, each in every case Loki lists; the first
	// in the line whose value is a string.
	json := `regexp_extract(` + line + `, '"(?:level|LEVEL|Level|log\.level|severity|SEVERITY|Severity|SeverityText|lvl|LVL|Lvl|severity_text|Severity_Text|SEVERITY_TEXT)"\s*:\s*"([^"]*)"', 1)`
	var logfmt []string
	for _, f := range logfmtLevelFields {
		logfmt = append(logfmt, levelOf(`regexp_extract(`+line+`, '(?i)(?:^|\s)`+f+`="?([^"\s]*)', 1)`))
	}
	// The first level word with a boundary on each side (Loki's
	// isLeftWordBoundary and isRightWordBoundary); at one place, the
	// words in Loki's order of levelPatterns.
	words := `regexp_extract(lower(` + line + `), '(?:^|[ \t\n\[({"''=|])(trace|debug|fatal|critical|error|err|warning|warn|info)(?:$|[ \t\n\[\](){}:,!"''=|])', 1)`
	return `coalesce(CASE WHEN regexp_matches(` + line + `, '^\s*\{(?s:.*)\}\s*$') THEN ` + levelOf(json) +
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
}

// metadata is a row's structured metadata, as Loki's OTLP ingestion
// makes it (pkg/loghttp/push/otlp.go otlpLogToPushEntry): the resource
// attributes that are not stream labels, the scope's name, version and
// attributes, the record's attributes, its severity, trace and span ids
// and its flags and dropped attributes when not zero.
func (r *row) metadata(res map[string]json.RawMessage, cache metadataCache) logql.Labels {
	base := cache.base(r, res)
	if r.traceID == "" && r.spanID == "" {
		return base
	}
	md := slices.Clone(base)
	for _, id := range []logql.Label{{Name: "trace_id", Value: r.traceID}, {Name: "span_id", Value: r.spanID}} {
		if id.Value != "" {
			id.Cat = logql.CatMetadata
			md = append(md, id)
		}
	}
	return dedupe(md.Sort())
}

// metadataKey is what a row's structured metadata but its ids come from.
type metadataKey struct {
	res, scope, attrs, scopeName, scopeVersion, severityText string
	severityNumber                                           int32
	flags, dropped                                           int64
}

// metadataCache keeps the structured metadata of a query's rows but
// their trace and span ids: rows of a service share their attributes
// far more often than not, and reading the JSON is most of the cost of
// a row.
type metadataCache map[metadataKey]logql.Labels

// maxCached bounds a metadataCache: past it, the cache starts again.
const maxCached = 10000

func (c metadataCache) base(r *row, res map[string]json.RawMessage) logql.Labels {
	k := metadataKey{r.resource, r.scope, r.attrs, r.scopeName, r.scopeVersion, r.severityText, r.severityNumber, r.flags, r.droppedAttributes}
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
func (r *row) baseMetadata(res map[string]json.RawMessage) logql.Labels {
	var md logql.Labels
	md = attrLabels(md, "", res, logql.CatMetadata, isIndexed)
	add := func(name, v string) {
		if v != "" {
			md = append(md, logql.Label{Name: name, Value: v, Cat: logql.CatMetadata})
		}
	}
	add("scope_name", r.scopeName)
	add("scope_version", r.scopeVersion)
	for _, obj := range []string{r.scope, r.attrs} {
		if obj == "" || obj == "{}" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(obj), &m) == nil {
			md = attrLabels(md, "", m, logql.CatMetadata, nil)
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
