package genai

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/prices"
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

// LoadFixtures reads the fixtures; tests elsewhere send the same spans
// through tracelake.
func LoadFixtures(t testing.TB, path string) []Fixture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Fixtures []Fixture `json:"fixtures"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Fixtures
}

// Attributes builds the fixture's attributes: numbers with a point or an
// exponent are doubles, others ints, arrays slices.
func (f *Fixture) Attributes(t testing.TB) pcommon.Map {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(f.Span.Attributes))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	m := pcommon.NewMap()
	if err := m.FromRaw(typed(raw).(map[string]any)); err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return m
}

func typed(v any) any {
	switch v := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			f, _ := v.Float64()
			return f
		}
		i, _ := v.Int64()
		return i
	case []any:
		for i := range v {
			v[i] = typed(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = typed(v[k])
		}
	}
	return v
}

// Row is an operation's columns as JSON values, the null ones left out.
func Row(op *Operation) map[string]any {
	out := map[string]any{}
	for i, v := range op.Values() {
		name := Columns[i].Name
		switch v := v.(type) {
		case string:
			if v != "" {
				out[name] = v
			}
		case Decimal:
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

func TestFixtures(t *testing.T) {
	table := prices.Embedded()
	for _, f := range LoadFixtures(t, "testdata/fixtures.json") {
		t.Run(f.Name, func(t *testing.T) {
			m := NewMapper(table, true)
			s := Span{Name: f.Span.Name, Attributes: f.Attributes(t), StatusError: f.Span.Status == "error",
				StatusMessage: f.Span.StatusMessage, Start: f.Span.Start}
			op, ok := m.Map(&s)
			if f.Want == nil {
				if ok {
					t.Fatalf("not a GenAI span, but read as %v", Row(&op))
				}
				return
			}
			if !ok {
				t.Fatal("not read as a GenAI operation")
			}
			if got := Row(&op); !reflect.DeepEqual(got, f.Want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(f.Want, "", " ")
				t.Errorf("row\n%s\nwant\n%s", g, w)
			}
			if got := m.Stats().Unpriced.Load(); got != map[bool]int64{false: 0, true: 1}[f.Unpriced] {
				t.Errorf("unpriced %d, want %v", got, f.Unpriced)
			}
			for i, name := range ColumnNames {
				if got, want := m.Stats().Invalid[i].Load(), f.Invalid[name]; got != want {
					t.Errorf("invalid %s: %d, want %d", name, got, want)
				}
			}
		})
	}
}

// Without content capture no messages are kept, whatever the span holds.
func TestContentOff(t *testing.T) {
	f := LoadFixtures(t, "testdata/fixtures.json")[0]
	s := Span{Name: f.Span.Name, Attributes: f.Attributes(t)}
	op, ok := NewMapper(nil, false).Map(&s)
	if !ok || op.InputMessages != nil || op.OutputMessages != nil {
		t.Fatalf("messages kept without capture: %s %s", op.InputMessages, op.OutputMessages)
	}
}
