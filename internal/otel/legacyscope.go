package otel

import (
	"bytes"
	"encoding/json"

	"github.com/tracelake/tracelake/internal/envelope"
)

// Senders of OTLP before 0.19 name a resource's scope list
// instrumentationLibrarySpans (…Logs, …Metrics), each holding its scope as
// instrumentationLibrary. In protobuf that list was field 2, today's,
// before 0.15, and from 0.15 to 0.18 the deprecated field 1000, which
// pdata's export requests move to field 2 (otlp.MigrateTraces: used when
// the resource has no scope in field 2, ignored when it has). pdata's JSON unmarshalers know neither name: they skip the keys as
// unknown, so such a request decoded to nothing, answered a success and
// stored no row. PrepareJSON renames them to today's names before pdata
// reads the body, with the protobuf path's rule, which is also the one
// opentelemetry-proto 0.18 gives JSON receivers (a JSON sender may
// double-publish the same scopes under both names; the old copy is then
// ignored).

// scopeLevel is one signal's JSON names of the resource list and of a
// resource's scope list, each in lowerCamelCase and as the proto field
// name, both of which OTLP/JSON receivers accept.
type scopeLevel struct {
	resources, scopes, legacyScopes [2]string
}

var (
	traceScopes  = scopeLevel{resources: [2]string{"resourceSpans", "resource_spans"}, scopes: [2]string{"scopeSpans", "scope_spans"}, legacyScopes: [2]string{"instrumentationLibrarySpans", "instrumentation_library_spans"}}
	logScopes    = scopeLevel{resources: [2]string{"resourceLogs", "resource_logs"}, scopes: [2]string{"scopeLogs", "scope_logs"}, legacyScopes: [2]string{"instrumentationLibraryLogs", "instrumentation_library_logs"}}
	metricScopes = scopeLevel{resources: [2]string{"resourceMetrics", "resource_metrics"}, scopes: [2]string{"scopeMetrics", "scope_metrics"}, legacyScopes: [2]string{"instrumentationLibraryMetrics", "instrumentation_library_metrics"}}
)

// legacyScope is the key of the scope in an old scope list's entries;
// scopeKey is today's, with its quotes.
var (
	legacyScope = [2]string{"instrumentationLibrary", "instrumentation_library"}
	scopeKey    = []byte(`"scope"`)
)

// Every old name starts with legacyStart, then one of legacyNext, unless
// it is spelt with an escape (unicodeEscape), which pdata reads too.
var (
	legacyStart   = []byte(`"instrumentation`)
	legacyNext    = [2][]byte{[]byte("Library"), []byte("_library")}
	unicodeEscape = []byte(`\u`)
)

// PrepareJSON is an OTLP/JSON export request (a body, or an otlp_json
// message) of signal as pdata's JSON unmarshalers must read it: refused
// with anything but white space after it (CheckOneJSONValue), without
// the members whose value is null (withoutNulls), and with
// the scopes of a sender older than OTLP 0.19 under today's names. A body
// that holds no old name and no \u escape (which could spell one), nearly
// every current sender's, is returned as it is, after one scan for them.
func PrepareJSON(signal string, b []byte) ([]byte, error) {
	mayHoldNull, err := checkOneJSONValue(b)
	if err != nil {
		return nil, err
	}
	if mayHoldNull {
		b = withoutNulls(b)
	}
	if !mayHoldLegacyScopes(b) {
		return b, nil
	}
	lv := &traceScopes
	switch signal {
	case SignalLogs:
		lv = &logScopes
	case SignalMetrics:
		lv = &metricScopes
	}
	return lv.migrate(b), nil
}

// mayHoldLegacyScopes says whether b holds a string starting with one of
// the old names, which every old key is, or an escape, with which a key
// may spell one (pdata decodes keys' escapes).
func mayHoldLegacyScopes(b []byte) bool {
	if bytes.Contains(b, unicodeEscape) {
		return true
	}
	for {
		i := bytes.Index(b, legacyStart)
		if i < 0 {
			return false
		}
		b = b[i+len(legacyStart):]
		if bytes.HasPrefix(b, legacyNext[0]) || bytes.HasPrefix(b, legacyNext[1]) {
			return true
		}
	}
}

// migrate returns the request b with each resource's old scope lists
// renamed to today's when it has no scope under today's name, and left
// out when it has. Where b is not a JSON object of the shape looked for,
// it is returned as it is: what it holds is pdata's to judge.
func (lv *scopeLevel) migrate(b []byte) []byte {
	start := envelope.SkipJSONSpace(b, 0)
	members, ok := objectMembers(b, start)
	if !ok {
		return b
	}
	out := make([]byte, 0, len(b)+64)
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		var resources []span
		ok := isKey(b[m.start:m.key], lv.resources)
		if ok {
			resources, ok = arrayElements(b, m.value)
		}
		if !ok {
			out = append(out, b[m.start:m.end]...)
			continue
		}
		out = append(out, b[m.start:m.value]...)
		out = append(out, '[')
		for j, r := range resources {
			if j > 0 {
				out = append(out, ',')
			}
			out = lv.appendResource(out, b[r.start:r.end])
		}
		out = append(out, ']')
	}
	return append(out, '}')
}

// appendResource appends the resource r with its old scope lists migrated.
func (lv *scopeLevel) appendResource(out, r []byte) []byte {
	members, ok := objectMembers(r, 0)
	if !ok {
		return append(out, r...)
	}
	// pdata appends the lists of a key given twice, and uses the old lists
	// only when today's hold no scope (otlp.MigrateTraces).
	hasScopes, hasLegacy := false, false
	for _, m := range members {
		switch {
		case isKey(r[m.start:m.key], lv.scopes):
			hasScopes = hasScopes || holdsElement(r, m.value)
		case isKey(r[m.start:m.key], lv.legacyScopes):
			hasLegacy = true
		}
	}
	if !hasLegacy {
		return append(out, r...)
	}
	out = append(out, '{')
	first := true
	for _, m := range members {
		legacy := isKey(r[m.start:m.key], lv.legacyScopes)
		if legacy && hasScopes {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if !legacy {
			out = append(out, r[m.start:m.end]...)
			continue
		}
		out = append(out, '"')
		out = append(out, lv.scopes[0]...)
		out = append(out, '"', ':')
		out = appendLegacyScopes(out, r[m.value:m.end])
	}
	return append(out, '}')
}

// appendLegacyScopes appends the old scope list v with each scope's
// instrumentationLibrary named scope. A value that is not a list is
// appended as it is (pdata reads it as it would under today's name).
func appendLegacyScopes(out, v []byte) []byte {
	scopes, ok := arrayElements(v, 0)
	if !ok {
		return append(out, v...)
	}
	out = append(out, '[')
	for i, s := range scopes {
		if i > 0 {
			out = append(out, ',')
		}
		members, ok := objectMembers(v, s.start)
		if !ok {
			out = append(out, v[s.start:s.end]...)
			continue
		}
		out = append(out, '{')
		for j, m := range members {
			if j > 0 {
				out = append(out, ',')
			}
			if isKey(v[m.start:m.key], legacyScope) {
				out = append(out, scopeKey...)
				out = append(out, v[m.key:m.end]...)
				continue
			}
			out = append(out, v[m.start:m.end]...)
		}
		out = append(out, '}')
	}
	return append(out, ']')
}

// isKey says whether the JSON string key (with its quotes) is one of
// names, read as pdata reads it: with its escapes decoded, so that a key
// spelt "scope\u0053pans" is today's scope list too.
func isKey(key []byte, names [2]string) bool {
	if len(key) < 2 {
		return false
	}
	k := key[1 : len(key)-1]
	if bytes.IndexByte(k, '\\') >= 0 {
		var decoded string
		if err := json.Unmarshal(key, &decoded); err != nil {
			return false // not a JSON string: pdata refuses the body
		}
		k = []byte(decoded)
	}
	return string(k) == names[0] || string(k) == names[1]
}

// member is one member of a JSON object: its key from start to key (the
// key's closing quote included), its value from value to end.
type member struct{ start, key, value, end int }

// span is one element of a JSON array.
type span struct{ start, end int }

// objectMembers returns the members of the object at b[i]; ok is false
// when b[i:] does not start with an object of that structure (its syntax
// is left to pdata).
func objectMembers(b []byte, i int) (members []member, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	j := envelope.SkipJSONSpace(b, i+1)
	if j < len(b) && b[j] == '}' {
		return nil, true
	}
	for j < len(b) && b[j] == '"' {
		m := member{start: j, key: envelope.JSONStringEnd(b, j)}
		j = envelope.SkipJSONSpace(b, m.key)
		if j >= len(b) || b[j] != ':' {
			return nil, false
		}
		m.value = envelope.SkipJSONSpace(b, j+1)
		if m.value >= len(b) {
			return nil, false
		}
		m.end = envelope.JSONValueEnd(b, m.value)
		members = append(members, m)
		j = envelope.SkipJSONSpace(b, m.end)
		if j < len(b) && b[j] == '}' {
			return members, true
		}
		if j >= len(b) || b[j] != ',' {
			return nil, false
		}
		j = envelope.SkipJSONSpace(b, j+1)
	}
	return nil, false
}

// holdsElement says whether b[i] starts an array with an element.
func holdsElement(b []byte, i int) bool {
	if b[i] != '[' {
		return false
	}
	j := envelope.SkipJSONSpace(b, i+1)
	return j < len(b) && b[j] != ']'
}

// arrayElements returns the elements of the array at b[i]; ok is false
// when b[i:] does not start with an array of that structure.
func arrayElements(b []byte, i int) (elems []span, ok bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	j := envelope.SkipJSONSpace(b, i+1)
	if j < len(b) && b[j] == ']' {
		return nil, true
	}
	for j < len(b) {
		e := span{start: j, end: envelope.JSONValueEnd(b, j)}
		elems = append(elems, e)
		j = envelope.SkipJSONSpace(b, e.end)
		if j < len(b) && b[j] == ']' {
			return elems, true
		}
		if j >= len(b) || b[j] != ',' {
			return nil, false
		}
		j = envelope.SkipJSONSpace(b, j+1)
	}
	return nil, false
}
