package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

var (
	spansTable = schema.Table{Name: "spans", Columns: []schema.Column{{Name: "name", Type: schema.String}}}
	opsTable   = schema.Table{Name: "ops", Columns: []schema.Column{{Name: "name", Type: schema.String}, {Name: "cost", Type: schema.Decimal}}}
)

// typedBatch holds, per offset of partition 0, two span rows and an
// operation derived from the second.
func typedBatch(first, last int64) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: last}
	for o := first; o <= last; o++ {
		for i := range 2 {
			b.Rows = fmt.Appendf(b.Rows, `{"name":"span %d.%d","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":%d}`+"\n", o, i, o, i)
			r.Records++
		}
		b.Derived = fmt.Appendf(b.Derived, `{"name":"op %d","cost":"123456.%012d","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":1}`+"\n", o, o, o)
	}
	b.Ranges = []sink.Range{r}
	return b
}

// Derived rows are committed with each load, fenced by the derived
// table's own positions: a batch its positions cover in part (a former
// owner's) is written again without the covered rows; decimals stay
// exact.
func TestDerivedRowsAreCommittedAndFenced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := iceberg.Open(ctx, iceberg.Options{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: "spans",
		Typed: &spansTable, Derived: &opsTable, DerivedTable: "ops",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, typedBatch(0, 9))
	l := load(t, s, typedBatch(5, 14), typedBatch(15, 19))
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 20 {
		t.Errorf("loaded %+v, want the 20 span rows past offset 9", l.Ranges)
	}
	want := func(from, to int64, price string) []string {
		var out []string
		for o := from; o <= to; o++ {
			out = append(out, fmt.Sprintf("op %d %s.%012d", o, price, o))
		}
		slices.Sort(out)
		return out
	}
	if got := operations(t, s); !slices.Equal(got, want(0, 19, "123456")) {
		t.Errorf("operations\n%v\nwant\n%v", got, want(0, 19, "123456"))
	}

	// A rebuild replaces every operation and keeps the table's positions:
	// the next load adds only the operations past them.
	var rebuilt []byte
	for o := range 20 {
		rebuilt = fmt.Appendf(rebuilt, `{"name":"op %d","cost":"654321.%012d","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":1}`+"\n", o, o, o)
	}
	if n, err := s.ReplaceDerived(ctx, [][]byte{rebuilt}); err != nil || n != 20 {
		t.Fatalf("rebuild: %d rows, %v", n, err)
	}
	load(t, s, typedBatch(15, 24))
	after := append(want(0, 19, "654321"), want(20, 24, "123456")...)
	slices.Sort(after)
	if got := operations(t, s); !slices.Equal(got, after) {
		t.Errorf("after the rebuild and a load:\n%v\nwant\n%v", got, after)
	}
}

// operations reads the ops table: each row's name and cost, sorted.
func operations(t *testing.T, s *iceberg.Sink) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, s.DerivedIdentifier())
	if err != nil {
		t.Fatal(err)
	}
	if spec := tbl.Spec(); spec.NumFields() != 0 {
		t.Errorf("ops is partitioned by %v; it names no tenant or time", spec)
	}
	_, batches, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		names := rec.Column(0).(*array.String)
		costs := rec.Column(1).(*array.Decimal128)
		for i := range int(rec.NumRows()) {
			got = append(got, names.Value(i)+" "+costs.Value(i).ToString(12))
		}
		rec.Release()
	}
	slices.Sort(got)
	return got
}
