package databend_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// spansOf makes the sink load otel_spans declared as typed, with the
// dedup model's tables, as tracelake run does for OTLP traces.
func spansOf(typed *schema.Table) func(*databend.Options) {
	d := merge.Dedup{Table: typed, Name: "otel_spans"}
	return func(o *databend.Options) {
		o.Table, o.Prefix, o.Typed = "otel_spans", "tracelake/otel_spans/", typed
		st := d.Databend()
		o.DedupTables, o.Setup, o.DedupReset = []string{d.Target(), d.DatabendIncrement()}, st.Setup, st.Reset
	}
}

// A deployment upgraded from the release before start_time_unix_nano
// has otel_spans and its dedup tables without it. Prepare used to refuse
// them ("column start_time_unix_nano is missing"); now it adds the column
// to each (ALTER TABLE … ADD COLUMN, as databend-query takes it): the
// older rows read NULL, the new rows their value, in the table and in
// the dedup target the merge fills, and a second start alters nothing.
func TestDeclaredTablesGainNewColumns(t *testing.T) {
	ctx := context.Background()
	srv := databendtest.New("tl", "s3cret")
	srv.Set(func() { srv.SQL = true }) // the dedup model's SQL
	t.Cleanup(srv.Close)
	start := func(typed *schema.Table) *databend.Sink {
		t.Helper()
		s := open(t, srv, "", spansOf(typed))
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	dedup := func(s *databend.Sink, typed *schema.Table) {
		t.Helper()
		if err := s.ExecTx(ctx, merge.Dedup{Table: typed, Name: "otel_spans"}.Databend().Merge...); err != nil {
			t.Fatal(err)
		}
	}
	old := start(sinktest.OlderSpans())
	if _, err := old.Load(ctx, stage(t, old, sinktest.SpanBatch(0, 4, false))); err != nil {
		t.Fatal(err)
	}
	dedup(old, sinktest.OlderSpans())

	s := start(&otel.Spans)
	for _, table := range []string{"otel_spans", "otel_spans_dedup", "otel_spans_dedup_increment"} {
		cols := srv.Columns(table)
		if last := cols[len(cols)-1]; last != sinktest.NewColumn+" BIGINT" {
			t.Errorf("%s: last column %q, want the one added", table, last)
		}
	}
	if _, err := s.Load(ctx, stage(t, s, sinktest.SpanBatch(5, 9, true))); err != nil {
		t.Fatal(err)
	}
	dedup(s, &otel.Spans)
	for _, table := range []string{"otel_spans", "otel_spans_dedup"} {
		var got []string
		for _, r := range srv.Rows(table) {
			nanos := string(r[sinktest.NewColumn])
			if nanos == "" {
				nanos = "null"
			}
			got = append(got, string(r["koffset"])+" "+nanos)
		}
		slices.Sort(got)
		var want []string
		for o := range int64(10) {
			nanos := "null"
			if o >= 5 {
				nanos = strconv.FormatInt(sinktest.SpanNanos(o), 10)
			}
			want = append(want, strconv.FormatInt(o, 10)+" "+nanos)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s koffset start_time_unix_nano:\n%v\nwant\n%v", table, got, want)
		}
	}

	alters := func() int {
		n := 0
		for _, q := range srv.Statements() {
			if strings.HasPrefix(q, "ALTER TABLE") {
				n++
			}
		}
		return n
	}
	before := alters()
	start(&otel.Spans)
	if after := alters(); before != 3 || after != before {
		t.Errorf("ALTER TABLE statements: %d on the upgrade (want 3: the table and its two dedup tables), %d more on the next start (want 0)", before, after-before)
	}
}

// A declared column the table has with another type is an error naming
// the table, the column and both types; nothing is altered.
func TestDeclaredColumnOfAnotherType(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("otel_spans", []string{"tenant_id", "flags"}, []string{"VARCHAR", "VARCHAR"})
	s := open(t, srv, "", func(o *databend.Options) { o.Table, o.Typed = "otel_spans", &otel.Spans })
	err := s.Prepare(context.Background())
	var changed *schema.TypeChangedError
	if !errors.As(err, &changed) {
		t.Fatalf("Prepare: %v; want a TypeChangedError", err)
	}
	if want := (schema.TypeChangedError{Table: "otel_spans", Column: "flags", Have: "VARCHAR", Want: "BIGINT"}); *changed != want {
		t.Errorf("error %+v, want %+v", *changed, want)
	}
	if cols := srv.Columns("otel_spans"); len(cols) != 2 {
		t.Errorf("columns %v: a table with a changed type was altered", cols)
	}
}

// The fake answers ALTER TABLE … ADD COLUMN of a column the table has as
// databend-query does (1108), so a sink that added a column twice fails
// here as it would there.
func TestFakeAddColumnTwice(t *testing.T) {
	srv, s := prepared(t, "")
	ctx := context.Background()
	if err := s.Exec(ctx, `ALTER TABLE trace_raw ADD COLUMN extra BIGINT NULL`); err != nil {
		t.Fatal(err)
	}
	if cols := srv.Columns("trace_raw"); cols[len(cols)-1] != "extra BIGINT" {
		t.Errorf("columns %v: extra not added last", cols)
	}
	err := s.Exec(ctx, `ALTER TABLE trace_raw ADD COLUMN extra BIGINT NULL`)
	if err == nil || !strings.Contains(err.Error(), "1108") {
		t.Errorf("adding a column twice: %v, want error 1108", err)
	}
}
