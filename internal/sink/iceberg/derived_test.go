package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// Derived rows are committed with each load, fenced by the derived
// table's own positions: a batch its positions cover in part (a former
// owner's) is written again without the covered rows; decimals stay
// exact.
func TestDerivedRowsAreCommittedAndFenced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := iceberg.Open(ctx, iceberg.Options{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: "spans",
		Typed: &sinktest.Spans, Derived: &sinktest.Ops, DerivedTable: "ops",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, sinktest.DerivedBatch(0, 9, 123456))
	l := load(t, s, sinktest.DerivedBatch(5, 14, 123456), sinktest.DerivedBatch(15, 19, 123456))
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
	for o := range int64(20) {
		rebuilt = sinktest.OpRow(rebuilt, o, 654321)
	}
	if n, err := s.ReplaceDerived(ctx, [][]byte{rebuilt}); err != nil || n != 20 {
		t.Fatalf("rebuild: %d rows, %v", n, err)
	}
	load(t, s, sinktest.DerivedBatch(15, 24, 123456))
	after := append(want(0, 19, "654321"), want(20, 24, "123456")...)
	slices.Sort(after)
	if got := operations(t, s); !slices.Equal(got, after) {
		t.Errorf("after the rebuild and a load:\n%v\nwant\n%v", got, after)
	}
	// Maintenance looks after the derived table too.
	compacted, err := s.Compact(ctx, 512<<20, time.Now().Add(72*time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(compacted, func(c iceberg.Compaction) bool { return c.Table == "tracelake.ops" && c.Groups > 0 }) {
		t.Errorf("compaction plans nothing for tracelake.ops: %+v", compacted)
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
