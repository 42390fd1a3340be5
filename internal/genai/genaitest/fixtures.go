// Package genaitest holds spans as each GenAI convention's instrumentation
// emits them (fixtures.json), with the genai_operations row expected of
// each, for the mapping's tests and tracelake's end-to-end ones.
package genaitest

import (
	_ "embed"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
)

// Fixture is one span of testdata/fixtures.json and what it must become.
type Fixture struct {
	Name string `json:"name"`
	Span struct {
		Name          string          `json:"name"`
		Start         time.Time       `json:"start_time"`
		Status        string          `json:"status"`
		StatusMessage string          `json:"status_message"`
		Attributes    json.RawMessage `json:"attributes"`
	} `json:"span"`
	Want     map[string]any   `json:"want"` // nil: not an operation
	Unpriced bool             `json:"unpriced"`
	Invalid  map[string]int64 `json:"invalid"`
}

//go:embed fixtures.json
var fixtures []byte

// Fixtures returns the fixtures.
func Fixtures(t testing.TB) []Fixture {
	t.Helper()
	var f struct {
		Fixtures []Fixture `json:"fixtures"`
	}
	if err := json.Unmarshal(fixtures, &f); err != nil {
		t.Fatal(err)
	}
	return f.Fixtures
}

// Attributes builds the fixture's attributes: numbers with a point or an
// exponent are doubles, others ints, arrays slices.
func (f *Fixture) Attributes(t testing.TB) pcommon.Map {
	t.Helper()
	m, err := otel.AttributesFromJSON(f.Span.Attributes)
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return m
}

// Row is an operation's columns as JSON values, the null ones left out.
func Row(op *genai.Operation) map[string]any {
	out := map[string]any{}
	for i, v := range op.Values() {
		name := genai.Columns[i].Name
		switch v := v.(type) {
		case string:
			if v != "" {
				out[name] = v
			}
		case genai.Decimal:
			if v != "" {
				out[name] = string(v)
			}
		case *int64:
			if v != nil {
				out[name] = float64(*v)
			}
		case *float64:
			if v != nil {
				out[name] = *v
			}
		case []string:
			if v != nil {
				list := make([]any, len(v))
				for i, s := range v {
					list[i] = s
				}
				out[name] = list
			}
		case []byte:
			if v != nil {
				var j any
				if err := json.Unmarshal(v, &j); err != nil {
					out[name] = "invalid JSON: " + string(v)
				} else {
					out[name] = j
				}
			}
		}
	}
	return out
}
