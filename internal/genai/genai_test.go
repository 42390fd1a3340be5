package genai_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/genai/genaitest"
	"github.com/tracelake/tracelake/internal/prices"
)

func TestFixtures(t *testing.T) {
	table := prices.Embedded()
	for _, f := range genaitest.Fixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			m := genai.NewMapper(table, true)
			s := genai.Span{Name: f.Span.Name, Attributes: f.Attributes(t), StatusError: f.Span.Status == "error",
				Start: f.Span.Start, ScopeName: f.Span.Scope.Name, ScopeVersion: f.Span.Scope.Version}
			op, ok := m.Map(&s)
			if f.Want == nil {
				if ok {
					t.Fatalf("not a GenAI span, but read as %v", genaitest.Row(&op))
				}
				return
			}
			if !ok {
				t.Fatal("not read as a GenAI operation")
			}
			if got := genaitest.Row(&op); !reflect.DeepEqual(got, f.Want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(f.Want, "", " ")
				t.Errorf("row\n%s\nwant\n%s", g, w)
			}
			if got := m.Stats().Unpriced.Load(); got != map[bool]int64{false: 0, true: 1}[f.Unpriced] {
				t.Errorf("unpriced %d, want %v", got, f.Unpriced)
			}
			if got := m.Stats().CostOutOfRange.Load(); got != map[bool]int64{false: 0, true: 1}[f.CostOutOfRange] {
				t.Errorf("costs out of range %d, want %v", got, f.CostOutOfRange)
			}
			for i, name := range genai.ColumnNames {
				if got, want := m.Stats().Invalid[i].Load(), f.Invalid[name]; got != want {
					t.Errorf("invalid %s: %d, want %d", name, got, want)
				}
			}
		})
	}
}

// Without content capture no messages are kept, whatever the span holds.
func TestContentOff(t *testing.T) {
	f := genaitest.Fixtures(t)[0]
	s := genai.Span{Name: f.Span.Name, Attributes: f.Attributes(t)}
	op, ok := genai.NewMapper(nil, false).Map(&s)
	if !ok || op.InputMessages != nil || op.OutputMessages != nil {
		t.Fatalf("messages kept without capture: %s %s", op.InputMessages, op.OutputMessages)
	}
}

// The README's mapping tables are the ones the code reads.
func TestREADMEMappingTables(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := genai.MappingTables(); !strings.Contains(string(readme), want) {
		t.Errorf("README.md lacks the mapping tables as the code has them; paste:\n\n%s", want)
	}
}

// countingValues counts the values WriteValues hands over.
type countingValues struct{ n int }

func (c *countingValues) Text(string)      { c.n++ }
func (c *countingValues) Int(*int64)       { c.n++ }
func (c *countingValues) Float(*float64)   { c.n++ }
func (c *countingValues) Texts([]string)   { c.n++ }
func (c *countingValues) JSON([]byte)      { c.n++ }
func (c *countingValues) Cost(int64, bool) { c.n++ }

// WriteValues writes one value per column of Columns, which names them.
func TestWriteValuesCoversColumns(t *testing.T) {
	var c countingValues
	(&genai.Operation{}).WriteValues(&c)
	if c.n != len(genai.Columns) {
		t.Fatalf("WriteValues wrote %d values for %d columns", c.n, len(genai.Columns))
	}
}
