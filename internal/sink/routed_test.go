package sink

import (
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
)

func TestColumnHoldsAndJoin(t *testing.T) {
	var (
		i32   = Column{Type: schema.Int32}
		i64   = Column{Type: schema.Int64}
		f64   = Column{Type: schema.Float64}
		str   = Column{Type: schema.String}
		text  = Column{Type: schema.Decimal} // unknown precision: exact text
		d52   = Column{Type: schema.Decimal, Precision: 5, Scale: 2}
		d72   = Column{Type: schema.Decimal, Precision: 7, Scale: 2}
		d63   = Column{Type: schema.Decimal, Precision: 6, Scale: 3}
		d120  = Column{Type: schema.Decimal, Precision: 12, Scale: 2}
		d190  = Column{Type: schema.Decimal, Precision: 19, Scale: 0}
		d200  = Column{Type: schema.Decimal, Precision: 20, Scale: 0} // an integer beyond BIGINT
		d3810 = Column{Type: schema.Decimal, Precision: 38, Scale: 10}
		d3020 = Column{Type: schema.Decimal, Precision: 30, Scale: 20}
		ts    = Column{Type: schema.Timestamp}
		b     = Column{Type: schema.Bool}
		js    = Column{Type: schema.JSON}
	)
	for _, c := range []struct {
		have, want Column
		holds      bool
	}{
		{i32, i32, true}, {i64, i32, true}, {i32, i64, false}, {f64, i32, true}, {f64, i64, false},
		{d52, d52, true}, {d72, d52, true}, {d52, d72, false}, {d63, d52, true}, {d52, d63, false},
		{d120, i32, true}, {d72, i32, false}, {d190, i64, true}, {d3810, i64, true}, {d3020, i64, false},
		{text, i64, true}, {text, d3810, false}, {text, d52, false}, {str, i32, false}, {str, d52, false}, {str, text, true}, {text, str, true},
		{text, f64, false}, {d190, f64, false}, {f64, d52, false}, {text, d200, true}, {d200, i64, true}, {i64, d200, false}, {str, d200, false},
		{ts, i64, false}, {i64, ts, false}, {b, i32, false}, {js, str, false}, {str, js, false}, {str, b, false},
	} {
		if got := c.have.Holds(c.want); got != c.holds {
			t.Errorf("%+v holds %+v: %v, want %v", c.have, c.want, got, c.holds)
		}
	}
	for _, c := range []struct {
		a, b, want Column
		ok         bool
	}{
		{i32, i64, i64, true},
		{d52, d72, d72, true},
		{d52, d63, d63, true}, // 3 digits before the point and 2 after, or 3 and 3
		{d72, d63, Column{Type: schema.Decimal, Precision: 8, Scale: 3}, true},
		{i64, d52, Column{Type: schema.Decimal, Precision: 21, Scale: 2}, true},
		{i64, d3810, d3810, true},
		{i64, d3020, i64, false}, // 19 + 20 digits: more than a DECIMAL holds
		{i64, text, text, true},
		{i64, str, text, true}, // rows of a column widened to text that took strings since
		{d52, text, d52, false},
		{i64, f64, i64, false},
		{ts, i64, ts, false},
	} {
		got, ok := Join(c.a, c.b)
		if ok != c.ok || got != c.want {
			t.Errorf("Join(%+v, %+v) = %+v, %v; want %+v, %v", c.a, c.b, got, ok, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		have, c, want Column
		ok            bool
	}{
		{i32, i64, i64, true}, {i64, i32, i64, true},
		{i64, d52, Column{Type: schema.Decimal, Precision: 21, Scale: 2}, true},
		{i64, text, text, true},
		{text, i64, text, true},
		{text, str, text, true},
		{i64, str, i64, false},  // a number become a string changed meaning
		{d52, text, d52, false}, // a known decimal's text is not the source's
		{i64, d3020, i64, false},
		{f64, d52, f64, false},
	} {
		got, ok := Widen(c.have, c.c)
		if ok != c.ok || got != c.want {
			t.Errorf("Widen(%+v, %+v) = %+v, %v; want %+v, %v", c.have, c.c, got, ok, c.want, c.ok)
		}
	}
	// A batch's rows of one column are read with the type that holds them
	// all, whatever their order.
	var rows TableRows
	rows.AddColumn(Column{Name: "qty", Type: schema.Int32})
	rows.AddColumn(Column{Name: "note", Type: schema.String})
	rows.AddColumn(Column{Name: "qty", Type: schema.Int64})
	rows.AddColumn(Column{Name: "qty", Type: schema.Int32})
	rows.AddColumn(Column{Name: "note", Type: schema.Bool}) // no type holds both: the first stays
	if want := []Column{{Name: "qty", Type: schema.Int64}, {Name: "note", Type: schema.String}}; !slices.Equal(rows.Columns, want) {
		t.Errorf("columns %+v, want %+v", rows.Columns, want)
	}
}
