package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// A deployment upgraded from the release before start_time_unix_nano has
// otel_spans without it. Before AddColumns, Prepare refused the table
// ("column start_time_unix_nano is missing"), and a load into it would
// have failed on the column count. Now the column is added: the older
// rows read NULL, the new rows their value, and a second start changes
// nothing.
func TestDeclaredTableGainsNewColumns(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table = "otel_spans"
	run := func(typed *schema.Table, f func(s *Sink)) {
		t.Helper()
		o := opt
		o.Typed = typed
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		f(s)
	}
	run(sinktest.OlderSpans(), func(s *Sink) {
		mustLoad(t, s, sinktest.SpanBatch(0, 4, false))
	})
	var grown []Column
	run(&otel.Spans, func(s *Sink) {
		mustLoad(t, s, sinktest.SpanBatch(5, 9, true))
		var err error
		if grown, err = TableColumns(ctx, s.DB(), "otel_spans"); err != nil {
			t.Fatal(err)
		}
		rows, err := s.DB().QueryContext(ctx, `SELECT koffset, start_time_unix_nano, span_id FROM otel_spans ORDER BY koffset`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var o int64
			var nanos sql.NullInt64
			var span string
			if err := rows.Scan(&o, &nanos, &span); err != nil {
				t.Fatal(err)
			}
			want := sql.NullInt64{}
			if o >= 5 {
				want = sql.NullInt64{Int64: sinktest.SpanNanos(o), Valid: true}
			}
			if nanos != want || span != "span "+strconv.FormatInt(o, 10) {
				t.Errorf("offset %d: start_time_unix_nano %v, span_id %q; want %v, %q", o, nanos, span, want, "span "+strconv.FormatInt(o, 10))
			}
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != 10 {
			t.Errorf("%d rows, want 10", n)
		}
	})
	if last := grown[len(grown)-1]; last != (Column{sinktest.NewColumn, "BIGINT"}) {
		t.Errorf("last column %v, want the one added", last)
	}
	run(&otel.Spans, func(s *Sink) {
		again, err := TableColumns(ctx, s.DB(), "otel_spans")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, grown) {
			t.Errorf("a second start changed the columns:\n%v\nwas\n%v", again, grown)
		}
	})
}

// A declared column the table has with another type is an error naming
// the table, the column and both types; nothing is cast or added.
func TestDeclaredColumnOfAnotherType(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Typed = "otel_spans", &otel.Spans
	s := openWith(t, opt)
	if _, err := s.DB().Exec(`CREATE TABLE otel_spans (tenant_id VARCHAR, flags VARCHAR)`); err != nil {
		t.Fatal(err)
	}
	err := s.Prepare(ctx)
	var changed *schema.TypeChangedError
	if !errors.As(err, &changed) {
		t.Fatalf("Prepare: %v; want a TypeChangedError", err)
	}
	if want := (schema.TypeChangedError{Table: "otel_spans", Column: "flags", Have: "VARCHAR", Want: "BIGINT"}); *changed != want {
		t.Errorf("error %+v, want %+v", *changed, want)
	}
	cols, err := TableColumns(ctx, s.DB(), "otel_spans")
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) != 2 {
		t.Errorf("columns %v: a table with a changed type was altered", cols)
	}
}

// A column the table has that is no longer declared is left alone, and
// loads (by name) leave it null.
func TestUndeclaredColumnLeftAlone(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Typed = "otel_spans", &otel.Spans
	s := openWith(t, opt)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`ALTER TABLE otel_spans ADD COLUMN retired VARCHAR`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, sinktest.SpanBatch(0, 2, true))
	if n := count(t, s, `SELECT count(*) FROM otel_spans WHERE retired IS NULL AND start_time_unix_nano IS NOT NULL`); n != 3 {
		t.Errorf("%d rows with the undeclared column null and the declared ones loaded, want 3", n)
	}
}

// A derived table (genai_operations) grows as the declared table does:
// here ops created before it declared cost.
func TestDerivedTableGainsNewColumns(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Typed, opt.DerivedTable = "spans", &sinktest.Spans, "ops"
	olderOps := sinktest.Ops
	olderOps.Columns = olderOps.Columns[:1]
	for i, derived := range []*schema.Table{&olderOps, &sinktest.Ops} {
		o := opt
		o.Derived = derived
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = s.Load(ctx, stage(t, s, sinktest.DerivedBatch(int64(i*10), int64(i*10+1), 3)))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	opt.Derived = &sinktest.Ops
	s := openWith(t, opt)
	var got string
	q := `SELECT string_agg(name || ' ' || coalesce(cost::VARCHAR, 'null'), '; ' ORDER BY koffset) FROM ops`
	if err := s.DB().QueryRow(q).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "op 0 null; op 1 null; op 10 3.000000000010; op 11 3.000000000011"; got != want {
		t.Errorf("ops name cost: %s; want %s", got, want)
	}
}
