package loki

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/google/uuid"

	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Defaults of detected_fields (Loki pkg/loghttp/params.go: line_limit
// as query's limit, limit 1000 fields).
const (
	defaultLineLimit  = defaultLimit
	defaultFieldLimit = 1000
)

// staticLabels are kept by detected_labels whatever their values (Loki
// pkg/querier/querier.go DetectedLabels).
var staticLabels = []string{"cluster", "namespace", "instance", "pod"}

// detectedLabels answers /loki/api/v1/detected_labels, which Grafana's
// Logs Drilldown asks for the labels to break streams down by: each
// stream label with its number of distinct values, leaving out those
// whose values all look like ids (numbers or UUIDs; Loki
// shouldRejectLabel, containsAllIDTypes). Loki estimates cardinality with
// a sketch; it is exact here.
func (a *api) detectedLabels(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	values := map[string]map[string]bool{}
	for _, s := range ss {
		for _, l := range s.labels {
			if values[l.Name] == nil {
				values[l.Name] = map[string]bool{}
			}
			values[l.Name][l.Value] = true
		}
	}
	b := []byte(`{"detectedLabels":[`)
	n := 0
	for _, name := range slices.Sorted(maps.Keys(values)) {
		// A tenant is a category whatever its id looks like (a number
		// too): kept, as the static labels are.
		if !slices.Contains(staticLabels, name) && name != tenantLabel && rejectLabel(values[name]) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"label":`...)
		b = appendString(b, name)
		b = fmt.Appendf(b, `,"cardinality":%d}`, len(values[name]))
		n++
	}
	writeJSON(w, append(b, "]}"...))
}

// rejectLabel says whether a label's values are ids, not categories: no
// values, or every value a number or a UUID (0 and 1 alone are
// booleans, kept).
func rejectLabel(values map[string]bool) bool {
	if len(values) == 0 {
		return true
	}
	boolean := len(values) <= 2
	for v := range values {
		if v != "0" && v != "1" {
			boolean = false
		}
	}
	if boolean {
		return false
	}
	for v := range values {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			if _, err := uuid.Parse(v); err != nil {
				return false
			}
		}
	}
	return true
}

// detectedField is a field of detected_fields.
type detectedField struct {
	typ     string
	parsers []string
	values  map[string]bool
}

// fieldType is a value's type as Loki's determineType decides it.
func fieldType(v string) string {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return "int"
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return "float"
	}
	if _, err := strconv.ParseBool(v); err == nil {
		return "boolean"
	}
	if _, err := time.ParseDuration(v); err == nil {
		return "duration"
	}
	if _, err := logql.ParseBytes(v); err == nil {
		return "bytes"
	}
	return "string"
}

// detectedFields answers /loki/api/v1/detected_fields (Loki
// pkg/querier/queryrange/detected_fields.go), which Grafana asks for the
// fields of a query's lines: the structured metadata of the newest
// line_limit entries (parsers empty) and what the json or logfmt parser
// finds in their lines, each field with its type (decided by its first
// value), distinct values and parsers, at most limit fields.
func (a *api) detectedFields(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	res, fieldLimit, ok := a.detectedLines(w, r, scope)
	if !ok {
		return
	}
	fields := map[string]*detectedField{}
	add := func(l logql.Label, parser string) {
		f := fields[l.Name]
		if f == nil {
			if len(fields) >= fieldLimit {
				return
			}
			f = &detectedField{typ: fieldType(l.Value), parsers: []string{}, values: map[string]bool{}}
			fields[l.Name] = f
		}
		if parser != "" && !slices.Contains(f.parsers, parser) {
			f.parsers = append(f.parsers, parser)
		}
		f.values[l.Value] = true
	}
	for _, s := range res.Streams {
		for _, en := range s.Entries {
			for _, l := range en.Metadata {
				add(l, "")
			}
			parser, parsed := logql.LineFields(en.Line)
			for _, l := range parsed {
				add(l, parser)
			}
		}
	}
	b := []byte(`{"fields":[`)
	for i, name := range slices.Sorted(maps.Keys(fields)) {
		f := fields[name]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"label":`...)
		b = appendString(b, name)
		b = append(b, `,"type":`...)
		b = appendString(b, f.typ)
		b = fmt.Appendf(b, `,"cardinality":%d,"parsers":`, len(f.values))
		ps, _ := json.Marshal(f.parsers)
		b = append(b, ps...)
		b = append(b, '}')
	}
	writeJSON(w, fmt.Appendf(b, `],"limit":%d}`, fieldLimit))
}

// detectedLines reads the lines detected_fields and detected_field's
// values look at (Loki pkg/loghttp/query.go ParseDetectedFieldsQuery): the
// newest line_limit entries of a log query, and limit, the most fields
// or values to answer; false when it answered an error.
func (a *api) detectedLines(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) (*logql.Result, int, bool) {
	if !a.form(w, r) {
		return nil, 0, false
	}
	p, err := rangeParams(r, a.now())
	if err == nil && r.Form.Get("line_limit") != "" {
		p.Limit, err = strconv.Atoi(r.Form.Get("line_limit"))
	} else if err == nil {
		p.Limit = defaultLineLimit
	}
	fieldLimit := defaultFieldLimit
	if err == nil && r.Form.Get("limit") != "" {
		fieldLimit, err = strconv.Atoi(r.Form.Get("limit"))
	}
	var e logql.Expr
	if err == nil {
		e, err = logql.Parse(r.Form.Get("query"))
	}
	if err == nil {
		if _, isLog := e.(*logql.LogExpr); !isLog {
			err = badParam("detected fields take a log query")
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return nil, 0, false
	}
	p.Categorize = true
	res, err := logql.Eval(r.Context(), &source{reader: a.o.Reader, scope: scope, table: a.o.Table}, e, p)
	if err != nil {
		a.fail(w, r, err)
		return nil, 0, false
	}
	return res, fieldLimit, true
}

// detectedFieldValues answers /loki/api/v1/detected_field/{name}/values
// (Loki pkg/querier/queryrange/detected_fields.go
// parseDetectedFieldValues), which Grafana's Logs Drilldown asks for a
// field's values to filter by: the distinct values of the structured
// metadata and parsed fields of that name among the same lines as
// detected_fields, up to limit values (checked before each entry, as Loki
// does). A parsed value in bytes (a size with a unit) is written as
// go-humanize writes it, so it can go into a query as it is.
func (a *api) detectedFieldValues(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	res, limit, ok := a.detectedLines(w, r, scope)
	if !ok {
		return
	}
	name := r.PathValue("name")
	values := map[string]bool{}
	for _, s := range res.Streams {
		for _, en := range s.Entries {
			if len(values) >= limit {
				break
			}
			for _, l := range en.Metadata {
				if l.Name == name {
					values[l.Value] = true
				}
			}
			_, parsed := logql.LineFields(en.Line)
			for _, l := range parsed {
				if l.Name == name {
					values[bytesValue(l.Value)] = true
				}
			}
		}
	}
	if len(values) == 0 {
		// Loki's answer leaves out empty values and a zero limit.
		writeJSON(w, []byte(`{}`))
		return
	}
	b := []byte(`{"values":[`)
	for i, v := range slices.Sorted(maps.Keys(values)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	writeJSON(w, fmt.Appendf(b, `],"limit":%d}`, limit))
}

// bytesValue is v as Loki gives a parsed value of a size: go-humanize's
// SI form without its space ("1.5 KiB" becomes "1.5kB"), for a value
// go-humanize parses that ends in one of Loki's units (allowedBytesUnits).
func bytesValue(v string) string {
	n, err := humanize.ParseBytes(v)
	if err != nil || !hasBytesUnit(strings.ToLower(v)) {
		return v
	}
	return strings.Replace(humanize.Bytes(n), " ", "", 1)
}

// bytesUnits are the endings of Loki's allowedBytesUnits.
var bytesUnits = []string{"b", "kib", "kb", "mib", "mb", "gib", "gb", "tib", "tb", "pib", "pb", "eib", "eb",
	"ki", "k", "mi", "m", "gi", "g", "ti", "t", "pi", "p", "ei", "e"}

func hasBytesUnit(s string) bool {
	return slices.ContainsFunc(bytesUnits, func(u string) bool { return strings.HasSuffix(s, u) })
}
