package logql

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
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
			ok = ok && f.Keeps(e.Line)
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

// TestBucketedRangesAnswerAsEveryEntry: count_over_time, rate,
// bytes_over_time, bytes_rate and absent_over_time, summed per bucket of a
// step (rangeAggrBucketed: Grafana's log volume over a month no longer
// holds every entry of the month), answer exactly as the same queries
// evaluated over every entry, for ranges of one and several steps, with
// offsets, line filters, parsers and groupings, at entries on the windows'
// edges.
func TestBucketedRangesAnswerAsEveryEntry(t *testing.T) {
	var es entries
	for i := range int64(600) {
		// Entries at whole and odd times, some exactly on step edges.
		ts := i*sec/3 + (i%7)*sec/7
		lvl := []string{"info", "error", "warn"}[i%3]
		es = append(es, Entry{TS: ts, Line: fmt.Sprintf("m%d lvl=%s %s", i, lvl, strings.Repeat("x", int(i%11))),
			Stream: app([]string{"a", "b", "c"}[i%3])})
	}
	queries := []string{
		`count_over_time({app=~".+"}[%s]%s)`,
		`sum by (app) (rate({app=~"a|b"} |= "lvl" [%s]%s))`,
		`bytes_over_time({app="a"} | logfmt | lvl="error" [%s]%s)`,
		`sum by (lvl) (bytes_rate({app=~".+"} | logfmt [%s]%s))`,
		`absent_over_time({app="c"} |= "m59" [%s]%s)`,
		`sum without (lvl) (count_over_time({app="b"} != "x" | logfmt [%s]%s))`,
	}
	eval := func(q string, p Params, buckets bool) *Result {
		t.Helper()
		defer func(was bool) { bucketing = was }(bucketing)
		bucketing = buckets
		e, err := Parse(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		res, err := Eval(context.Background(), es, e, p)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return res
	}
	bucketed := 0
	for _, q := range queries {
		for _, rng := range []string{"1s", "3s", "10s"} {
			for _, off := range []string{"", " offset 2s"} {
				for _, p := range []Params{
					{Start: 5 * sec, End: 190 * sec, Step: time.Second},
					{Start: 0, End: 200 * sec, Step: 5 * time.Second},
					{Start: 7*sec + 1, End: 150 * sec, Step: 1500 * time.Millisecond},
					{Start: 77 * sec, End: 77 * sec, Instant: true},
				} {
					query := fmt.Sprintf(q, rng, off)
					e, _ := Parse(query)
					ev := &evaluator{steps: []int64{p.Start}}
					if !p.Instant {
						ev.steps = append(ev.steps, p.Start+int64(p.Step))
					}
					r, ok := e.(*RangeAggr)
					if va, isVec := e.(*VectorAggr); isVec {
						r, ok = va.Inner.(*RangeAggr)
					}
					if ok && r != nil {
						if _, b := ev.buckets(r); b {
							bucketed++
						}
					}
					want, got := eval(query, p, false), eval(query, p, true)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s %+v:\n bucketed %+v\n entries  %+v", query, p, got, want)
					}
				}
			}
		}
	}
	if bucketed == 0 {
		t.Fatal("no query was bucketed")
	}
	// Entries out of time order (a Source owes the order, the buckets do
	// not depend on it).
	backwards := slices.Clone(es)
	slices.Reverse(backwards)
	q, p := `sum by (app) (count_over_time({app=~".+"}[3s]))`, Params{Start: 5 * sec, End: 190 * sec, Step: time.Second}
	e, _ := Parse(q)
	got, err := Eval(context.Background(), backwards, e, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := eval(q, p, true); !reflect.DeepEqual(got, want) {
		t.Errorf("entries out of order:\n %+v\n want %+v", got, want)
	}
}

// liveAtEnd is a Source of n entries of one stream, one a millisecond
// from 1ms, made as they are read; at the end of the read it records the
// live heap (after a collection): what the evaluation holds of them.
type liveAtEnd struct {
	n    int64
	live uint64
}

func (s *liveAtEnd) Select(_ context.Context, sel Selection, fn func(*Entry) error) error {
	e := Entry{Line: "GET /api 200", Stream: app("a")}
	for i := range s.n {
		if e.TS = (i + 1) * int64(time.Millisecond); e.TS < sel.Start || e.TS >= sel.End {
			continue
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.live = ms.HeapAlloc
	return nil
}

// TestLogVolumeHoldsBucketsNotEntries: Grafana's log volume query
// (count_over_time per step) over a million entries holds a count per
// step, not a point per entry (16 MB and more of them), so a query over a
// month of a busy tenant cannot take the process's memory.
func TestLogVolumeHoldsBucketsNotEntries(t *testing.T) {
	e, err := Parse(`sum by (app) (count_over_time({app="a"}[10s]))`)
	if err != nil {
		t.Fatal(err)
	}
	p := Params{Start: 10 * sec, End: 1000 * sec, Step: 10 * time.Second}
	live := func(buckets bool) (uint64, float64) {
		defer func(was bool) { bucketing = was }(bucketing)
		bucketing = buckets
		src := &liveAtEnd{n: 1_000_000}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		res, err := Eval(context.Background(), src, e, p)
		if err != nil {
			t.Fatal(err)
		}
		var total float64
		for _, pt := range res.Matrix[0].Points {
			total += pt.V
		}
		return src.live - min(src.live, ms.HeapAlloc), total
	}
	entriesHeld, want := live(false)
	bucketsHeld, got := live(true)
	if got != want || want != 1_000_000 {
		t.Fatalf("counted %v entries bucketed, %v every entry held, want 1,000,000", got, want)
	}
	if entriesHeld < 8<<20 || bucketsHeld > entriesHeld/16 {
		t.Errorf("live heap at the end of the read: %d bytes bucketed, %d with every entry held", bucketsHeld, entriesHeld)
	}
	t.Logf("live heap at the end of the read: %d bytes bucketed, %d with every entry held", bucketsHeld, entriesHeld)
}

// TestBucketedHugeRangeDoesNotOverflow: a range near the longest
// duration, over steps spanning more than what is left of int64 after it,
// counted its entries' bucket from the first window's lower bound and
// overflowed: the bucketed path answered nothing where every entry's path
// answered 1.
func TestBucketedHugeRangeDoesNotOverflow(t *testing.T) {
	base := int64(1_700_000_000) * sec
	es := entries{{TS: base + 3000*sec, Line: "x", Stream: app("a")}}
	e, err := Parse(`count_over_time({app="a"}[2562047h])`)
	if err != nil {
		t.Fatal(err)
	}
	p := Params{Start: base, End: base + 3060*sec, Step: time.Minute}
	run := func(b bool) *Result {
		defer func(was bool) { bucketing = was }(bucketing)
		bucketing = b
		res, err := Eval(context.Background(), es, e, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	got, want := run(true), run(false)
	if len(want.Matrix) != 1 || len(want.Matrix[0].Points) != 2 || !reflect.DeepEqual(got, want) {
		t.Fatalf("bucketed %+v\n entries %+v", got.Matrix, want.Matrix)
	}
}

// TestHugeStepEndsTheSteps: a step that carries the next step's time past
// int64 (query_range accepts step=9223372036) wrapped it negative, below
// the end, and the steps never ended; Loki answers the first step alone.
func TestHugeStepEndsTheSteps(t *testing.T) {
	base := int64(1_700_000_000) * sec
	e, err := Parse(`count_over_time({app="a"}[1s])`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Result, 1)
	go func() {
		res, err := Eval(context.Background(), entries{{TS: base, Line: "x", Stream: app("a")}}, e,
			Params{Start: base, End: base + 10*sec, Step: 9223372036 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res == nil || len(res.Matrix) != 1 || len(res.Matrix[0].Points) != 1 || res.Matrix[0].Points[0].T != base {
			t.Fatalf("%+v", res)
		}
	case <-time.After(5 * time.Second):
		panic("the steps of a huge step never end") // stop the process before the steps take its memory
	}
}

// TestAbsentLabelsAsLoki: absent_over_time answers the equality
// matchers' labels, but none for a name another matcher also names
// (Loki pkg/logql/evaluator.go absentLabels): {app="z", app=~"z.*"}
// answered {app="z"}, {app="z", app="z"} the label twice.
func TestAbsentLabelsAsLoki(t *testing.T) {
	p := Params{Start: 3 * sec, End: 3 * sec, Instant: true}
	for q, want := range map[string]string{
		`absent_over_time({app="z", app=~"z.*"}[1s])`:       `{}`,
		`absent_over_time({app="z", app="z"}[1s])`:          `{}`,
		`absent_over_time({app="z", env="x", app!=""}[1s])`: `{env="x"}`,
	} {
		res := evalAt(t, q, p)
		if len(res.Vector) != 1 || res.Vector[0].Labels.String() != want {
			t.Errorf("%s: %+v, want %s", q, res.Vector, want)
		}
	}
}

// TestAbsentOverTimeWithUnwrap: Loki takes absent_over_time with unwrap
// (pkg/logql/syntax/ast.go RangeAggregationExpr.validate): a window is
// absent when no line of it gave a sample, so lines without the label do
// not count.
func TestAbsentOverTimeWithUnwrap(t *testing.T) {
	p := Params{Start: 3 * sec, End: 3 * sec, Instant: true}
	for q, want := range map[string]int{
		`absent_over_time({app="a"} | logfmt | unwrap n [2s])`:               1, // lvl, no n
		`absent_over_time({app="a"} | regexp "a(?P<n>\\d)" | unwrap n [2s])`: 0, // a2, a3
	} {
		if res := evalAt(t, q, p); len(res.Vector) != want {
			t.Errorf("%s: %+v, want %d samples", q, res.Vector, want)
		}
	}
}
