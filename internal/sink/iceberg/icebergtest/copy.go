package icebergtest

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Tables loads a catalog's tables (catalog.Catalog's LoadTable).
type Tables interface {
	LoadTable(context.Context, table.Identifier) (*table.Table, error)
}

// AppendCopy appends to table id, in a commit of its own that sets no
// position (another writer, or a bug), a copy of the rows filter selects
// with the integer columns of set given those values.
func AppendCopy(t testing.TB, cat Tables, id table.Identifier, filter iceberggo.BooleanExpression, set map[string]int64) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	sc, batches, err := tbl.Scan(table.WithRowFilter(filter)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		cols := slices.Clone(rec.Columns())
		for i, f := range sc.Fields() {
			v, ok := set[f.Name]
			if !ok {
				continue
			}
			switch f.Type.ID() {
			case arrow.INT64:
				b := array.NewInt64Builder(memory.DefaultAllocator)
				for range rec.NumRows() {
					b.Append(v)
				}
				cols[i] = b.NewArray()
			case arrow.INT32:
				b := array.NewInt32Builder(memory.DefaultAllocator)
				for range rec.NumRows() {
					b.Append(int32(v))
				}
				cols[i] = b.NewArray()
			default:
				t.Fatalf("column %s is %s", f.Name, f.Type)
			}
		}
		recs = append(recs, array.NewRecordBatch(sc, cols, rec.NumRows()))
	}
	if len(recs) == 0 || recs[0].NumRows() == 0 {
		t.Fatal("no row to copy")
	}
	copied := array.NewTableFromRecords(sc, recs)
	defer copied.Release()
	txn := tbl.NewTransaction()
	if err := txn.AppendTable(ctx, copied, 1024, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
