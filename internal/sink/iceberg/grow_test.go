package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// nanosByOffset reads a table's koffset and start_time_unix_nano as
// "offset nanos" lines ("null" for a null), sorted.
func nanosByOffset(t *testing.T, s *iceberg.Sink, name string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, table.Identifier{"tracelake", name})
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("koffset", sinktest.NewColumn)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		offs, nanos := rec.Column(idx("koffset")).(*array.Int64), rec.Column(idx(sinktest.NewColumn)).(*array.Int64)
		for i := range int(rec.NumRows()) {
			v := "null"
			if nanos.IsValid(i) {
				v = fmt.Sprint(nanos.Value(i))
			}
			out = append(out, fmt.Sprintf("%d %s", offs.Value(i), v))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// wantNanos is what nanosByOffset reads of SpanBatch's spans at offsets
// first..last, those from withFrom on loaded with start_time_unix_nano
// (the others read null in it), sorted as it sorts them.
func wantNanos(first, last, withFrom int64) []string {
	var want []string
	for o := first; o <= last; o++ {
		v := "null"
		if o >= withFrom {
			v = fmt.Sprint(sinktest.SpanNanos(o))
		}
		want = append(want, fmt.Sprintf("%d %s", o, v))
	}
	slices.Sort(want)
	return want
}

// A deployment upgraded from the release before start_time_unix_nano
// has otel_spans and otel_spans_dedup without it. Prepare used to refuse
// them ("column start_time_unix_nano is missing"); now both gain it by
// schema evolution: the files written before read NULL in it, the new
// rows their value, in the table and in the dedup target, and a second
// start commits no new schema.
func TestDeclaredTablesGainNewColumns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	spans := []string{"tenant_id", "trace_id", "span_id"}
	old := openTyped(t, dir, sinktest.OlderSpans())
	load(t, old, sinktest.SpanBatch(0, 4, false))
	if _, err := old.Dedup(ctx, spans); err != nil {
		t.Fatal(err)
	}

	s := openTyped(t, dir, &otel.Spans)
	load(t, s, sinktest.SpanBatch(5, 9, true))
	if res, err := s.Dedup(ctx, spans); err != nil || res.Inserted != 5 {
		t.Fatalf("merge after the upgrade: %+v, %v; want 5 spans inserted", res, err)
	}
	want := wantNanos(0, 9, 5)
	for _, name := range []string{"otel_spans", "otel_spans_dedup"} {
		if got := nanosByOffset(t, s, name); !slices.Equal(got, want) {
			t.Errorf("%s offset start_time_unix_nano:\n%v\nwant\n%v", name, got, want)
		}
	}

	schemas := func() map[string]int {
		out := map[string]int{}
		for _, name := range []string{"otel_spans", "otel_spans_dedup"} {
			tbl, err := s.Catalog().LoadTable(ctx, table.Identifier{"tracelake", name})
			if err != nil {
				t.Fatal(err)
			}
			if f, ok := tbl.Schema().FindFieldByName(sinktest.NewColumn); !ok || f.Required || !f.Type.Equals(iceberggo.PrimitiveTypes.Int64) {
				t.Errorf("%s: column %s %+v (found %v), want an optional long", name, sinktest.NewColumn, f, ok)
			}
			out[name] = len(tbl.Metadata().Schemas())
		}
		return out
	}
	before := schemas()
	openTyped(t, dir, &otel.Spans)
	if after := schemas(); !maps.Equal(before, after) || before["otel_spans"] != 2 {
		t.Errorf("schemas per table %v, then %v after a second start; want 2 each, unchanged", before, after)
	}
}

// A declared column the table has with another type is an error naming
// the table, the column and both types.
func TestDeclaredColumnOfAnotherType(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	changed := otel.Spans
	changed.Columns = slices.Clone(changed.Columns)
	for i, c := range changed.Columns {
		if c.Name == "flags" {
			changed.Columns[i].Type = schema.String
		}
	}
	openPrepared(t, dir, iceberg.Options{Table: "otel_spans", Typed: &changed})
	s, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "otel_spans", Typed: &otel.Spans})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Prepare(ctx)
	var tc *schema.TypeChangedError
	if !errors.As(err, &tc) {
		t.Fatalf("Prepare: %v; want a TypeChangedError", err)
	}
	if want := (schema.TypeChangedError{Table: "tracelake.otel_spans", Column: "flags", Have: "string", Want: "long"}); *tc != want {
		t.Errorf("error %+v, want %+v", *tc, want)
	}
}
