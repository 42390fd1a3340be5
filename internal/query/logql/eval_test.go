package logql

import (
	"context"
	"slices"
	"testing"
	"time"
)

// entries is a Source over entries in time order, applying what a
// Source must: matchers on stream labels, the time range, line filters,
// direction and limit.
type entries []Entry

func (es entries) Select(_ context.Context, sel Selection, fn func(*Entry) error) error {
	var out []Entry
	for _, e := range es {
		ok := e.TS >= sel.Start && e.TS < sel.End
		for _, m := range sel.Matchers {
			v, _ := e.Stream.Get(m.Name)
			ok = ok && m.Matches(v)
		}
		for _, f := range sel.Filters {
			ok = ok && f.keeps(e.Line)
		}
		if ok {
			out = append(out, e)
		}
	}
	if !sel.Forward {
		slices.Reverse(out)
	}
	for i := range out {
		if sel.Limit > 0 && i == sel.Limit {
			break
		}
		if err := fn(&out[i]); err != nil {
			return err
		}
	}
	return nil
}

func app(name string) Labels { return Labels{{Name: "app", Value: name}} }

var sec = int64(time.Second)

// testEntries: app a logs at 1s, 2s, 3s and 10s, app b at 2s.
var testEntries = entries{
	{TS: 1 * sec, Line: "a1 lvl=info", Stream: app("a")},
	{TS: 2 * sec, Line: "a2 lvl=error", Stream: app("a")},
	{TS: 2 * sec, Line: "b1 lvl=error", Stream: app("b")},
	{TS: 3 * sec, Line: "a3 lvl=error", Stream: app("a")},
	{TS: 10 * sec, Line: "a4 lvl=info", Stream: app("a")},
}

func evalAt(t *testing.T, q string, p Params) *Result {
	t.Helper()
	e, err := Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Eval(context.Background(), testEntries, e, p)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

// TestRangeWindowExcludesItsStart: a step's window is (t-range, t], as
// Loki's range vectors are.
func TestRangeWindowExcludesItsStart(t *testing.T) {
	res := evalAt(t, `count_over_time({app="a"}[2s])`, Params{Start: 3 * sec, End: 3 * sec, Instant: true})
	if res.Type != "vector" || len(res.Vector) != 1 || res.Vector[0].V != 2 {
		t.Fatalf("%+v", res)
	}
	res = evalAt(t, `sum(count_over_time({app=~"a|b"} | logfmt | lvl="error" [1s] offset 1s))`, Params{Start: 3 * sec, End: 3 * sec, Instant: true})
	if len(res.Vector) != 1 || res.Vector[0].V != 2 {
		t.Fatalf("offset: %+v", res.Vector)
	}
	res = evalAt(t, `count_over_time({app="a"}[5s])`, Params{Start: 0, End: 10 * sec, Step: 5 * time.Second})
	if res.Type != "matrix" || len(res.Matrix) != 1 {
		t.Fatalf("%+v", res)
	}
	var got []float64
	for _, p := range res.Matrix[0].Points {
		got = append(got, p.V)
	}
	// Steps 0 (nothing), 5s (1s..3s), 10s (10s).
	if !slices.Equal(got, []float64{3, 1}) || res.Matrix[0].Points[0].T != 5*sec {
		t.Fatalf("points %+v", res.Matrix[0].Points)
	}
}

// TestBinaryMatching: vectors match on their labels; on() narrows;
// comparisons filter unless bool; scalars apply to every sample.
func TestBinaryMatching(t *testing.T) {
	p := Params{Start: 3 * sec, End: 3 * sec, Instant: true}
	for q, want := range map[string][]float64{
		`count_over_time({app=~"a|b"}[3s]) / count_over_time({app=~"a|b"}[3s])`:        {1, 1},
		`sum by (app) (count_over_time({app=~"a|b"}[3s])) > 1`:                         {3},
		`sum by (app) (count_over_time({app=~"a|b"}[3s])) > bool 1`:                    {1, 0},
		`sum by (app) (count_over_time({app=~"a|b"}[3s])) * on() group_left vector(2)`: {6, 2},
		`2 ^ 3 - 1`: {7},
		`sum(count_over_time({app="a"}[3s])) or vector(0)`:                                             {3},
		`sum(count_over_time({app="c"}[3s])) or vector(0)`:                                             {0},
		`count_over_time({app=~"a|b"}[3s]) unless count_over_time({app="b"}[3s])`:                      {3},
		`label_replace(sum by (app) (count_over_time({app="a"}[3s])), "x", "$1!", "app", "(.*)") == 3`: {3},
	} {
		res := evalAt(t, q, p)
		var got []float64
		if res.Type == "scalar" {
			got = []float64{res.Scalar.V}
		}
		for _, s := range res.Vector {
			got = append(got, s.V)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}

// TestLogQueryLimitAfterFilters: a limit counts the entries the
// pipeline keeps, not those read.
func TestLogQueryLimitAfterFilters(t *testing.T) {
	res := evalAt(t, `{app="a"} | logfmt | lvl="info"`, Params{Start: 0, End: 20 * sec, Limit: 1})
	if len(res.Streams) != 1 || len(res.Streams[0].Entries) != 1 || res.Streams[0].Entries[0].Line != "a4 lvl=info" {
		t.Fatalf("%+v", res.Streams)
	}
}
