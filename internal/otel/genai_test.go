package otel_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/genai/genaitest"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
)

// The genai_operations row the decoder writes (NDJSON, as staged) holds
// each fixture's operation exactly: every value the mapping reads, costs
// as exact decimal text, and null for every column the operation lacks.
func TestAppendOperationWritesFixtures(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), true)
	for _, f := range genaitest.Fixtures(t) {
		if f.Want == nil {
			continue
		}
		s := otel.SpanRow{Tenant: "t", Name: f.Span.Name, Attributes: f.Attributes(t),
			ScopeName: f.Span.Scope.Name, ScopeVersion: f.Span.Scope.Version,
			StatusError: f.Span.Status == "error", Start: pcommon.NewTimestampFromTime(f.Span.Start),
			TraceID: pcommon.TraceID{1}, SpanID: pcommon.SpanID{2}, Topic: "k", Offset: 7}
		line, ok := otel.AppendOperation(nil, m, &s)
		if !ok {
			t.Fatalf("%s: no operation written", f.Name)
		}
		var row map[string]any
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("%s: %v in %s", f.Name, err, line)
		}
		for _, c := range genai.Columns {
			got, want := row[c.Name], f.Want[c.Name]
			if _, present := row[c.Name]; !present {
				t.Errorf("%s: column %s missing from %s", f.Name, c.Name, line)
			} else if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s = %#v, want %#v", f.Name, c.Name, got, want)
			}
		}
	}
}

// MakesOperation, which verify applies to the spans an Iceberg table
// holds, says of each fixture (and a few edge cases) what the mapper does.
func TestMakesOperationIsTheMappersRule(t *testing.T) {
	type span struct {
		name  string
		attrs pcommon.Map
	}
	var spans []span
	for _, f := range genaitest.Fixtures(t) {
		spans = append(spans, span{f.Span.Name, f.Attributes(t)})
	}
	for _, raw := range []map[string]any{nil, {"gen_ai.provider.name": nil}, {"gen_ai": map[string]any{"system": "x"}},
		{"note": `"gen_ai.system"`}, {"llm.model_name.x": "m"},
		// A marker by its value: the name and a value in the text are
		// not enough.
		{"ai.operationId": "ai.embed", "note": "ai.embed.doEmbed"}, {"ai.operationId": []any{"ai.embed.doEmbed"}},
		{"ai": map[string]any{"operationId": "ai.embed.doEmbed"}}, {"ai.operationId": "ai.embedMany.doEmbed"}} {
		m := pcommon.NewMap()
		if err := m.FromRaw(raw); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, span{"chat", m}, span{"claude_code.tool", m})
	}
	for i, s := range spans {
		j, err := json.Marshal(s.attrs.AsRaw())
		if err != nil {
			t.Fatal(err)
		}
		got, err := otel.MakesOperation(s.name, j)
		if want := genai.Convention(&genai.Span{Name: s.name, Attributes: s.attrs}) != ""; err != nil || got != want {
			t.Errorf("span %d %q %s: %v (%v), genai.Convention says %v", i, s.name, j, got, err, want)
		}
	}
}

// MakesOperation finds the markers' names and values in the JSON text as
// they are, quoted: none of them may hold a character the decoder
// escapes, or a span holding one would be told no operation unparsed.
func TestMarkersNeedNoEscaping(t *testing.T) {
	plain := regexp.MustCompile(`^[A-Za-z0-9._]+$`)
	for _, m := range genai.OperationMarkers() {
		for _, s := range append([]string{m.Attr}, m.Values...) {
			if !plain.MatchString(s) {
				t.Errorf("marker %q: %q is not plain text", m.Attr, s)
			}
		}
	}
}
