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
	"github.com/tracelake/tracelake/internal/prices"
)

// Fixture is one span of testdata/fixtures.json and what it must become.
type Fixture struct {
	Name string `json:"name"`
	Span struct {
		Name          string    `json:"name"`
		Start         time.Time `json:"start_time"`
		Status        string    `json:"status"`
		StatusMessage string    `json:"status_message"`
		// Scope is the span's instrumentation scope.
		Scope struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"scope"`
		Attributes json.RawMessage `json:"attributes"`
	} `json:"span"`
	Want     map[string]any `json:"want"` // nil: not an operation
	Unpriced bool           `json:"unpriced"`
	// CostOutOfRange: priced, but the cost does not fit the cost columns.
	CostOutOfRange bool             `json:"cost_out_of_range"`
	Invalid        map[string]int64 `json:"invalid"`
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
	r := rowValues{out: map[string]any{}}
	op.WriteValues(&r)
	return r.out
}

// rowValues collects an operation's values as Row returns them.
type rowValues struct {
	out map[string]any
	i   int
}

// set sets the next column to v, unless null.
func (r *rowValues) set(null bool, v func() any) {
	if !null {
		r.out[genai.Columns[r.i].Name] = v()
	}
	r.i++
}

func (r *rowValues) Text(s string) { r.set(s == "", func() any { return s }) }
func (r *rowValues) Cost(pico int64, ok bool) {
	r.set(!ok, func() any { return prices.Decimal(pico) })
}
func (r *rowValues) Int(v *int64)     { r.set(v == nil, func() any { return float64(*v) }) }
func (r *rowValues) Float(v *float64) { r.set(v == nil, func() any { return *v }) }

func (r *rowValues) Texts(v []string) {
	r.set(v == nil, func() any {
		list := make([]any, len(v))
		for i, s := range v {
			list[i] = s
		}
		return list
	})
}

func (r *rowValues) JSON(v []byte) {
	r.set(v == nil, func() any {
		var j any
		if err := json.Unmarshal(v, &j); err != nil {
			return "invalid JSON: " + string(v)
		}
		return j
	})
}
