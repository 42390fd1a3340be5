package iceberg

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// allTypes is a schema of every kind of column an Iceberg table can have
// (tracelake's own tables use the primitive ones; an adopted table or an
// engine's ALTER TABLE can add the others), sorted by tenant_id, trace_id.
var allTypes = arrow.NewSchema([]arrow.Field{
	{Name: "tenant_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "trace_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "dec", Type: &arrow.Decimal128Type{Precision: 38, Scale: 10}, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "list", Type: arrow.ListOf(arrow.PrimitiveTypes.Float64), Nullable: true},
	{Name: "tags", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.Binary), Nullable: true},
	{Name: "nested", Type: arrow.StructOf(
		arrow.Field{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
		arrow.Field{Name: "amount", Type: &arrow.Decimal128Type{Precision: 18, Scale: 12}, Nullable: true},
		arrow.Field{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	), Nullable: true},
}, nil)

// allTypesBatch builds n rows of allTypes, from row first on: a few
// tenants and trace ids (so sort keys repeat across batches and runs),
// nulls in every nullable column now and then, and values text cannot
// carry exactly (NaN, bytes that are not UTF-8, nanoseconds).
func allTypesBatch(first, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, allTypes)
	defer b.Release()
	for r := first; r < first+n; r++ {
		null := r%7 == 3
		if r%11 == 5 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("t%d", r%3))
		}
		if r%13 == 2 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%032x", (r*7919)%50))
		}
		b.Field(2).(*array.Int64Builder).Append(int64(r))
		if null {
			for c := 3; c < len(allTypes.Fields()); c++ {
				b.Field(c).AppendNull()
			}
			continue
		}
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_780_000_000_123_456_789 + int64(r)))
		b.Field(4).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(r)*1_000_000_007 + 1))
		b.Field(5).(*array.BinaryBuilder).Append([]byte{0xff, 0x00, byte(r), 0xfe})
		b.Field(6).(*array.Float32Builder).Append(float32(r) + 0.1)
		b.Field(7).(*array.Float64Builder).Append([]float64{math.NaN(), math.Inf(-1), 0.1 + float64(r)}[r%3])
		lb := b.Field(8).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Float64Builder).AppendValues([]float64{float64(r) / 3, math.Inf(1)}, nil)
		mb := b.Field(9).(*array.MapBuilder)
		mb.Append(true)
		mb.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d", r))
		mb.ItemBuilder().(*array.BinaryBuilder).Append([]byte{0x80, byte(r)})
		sb := b.Field(10).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.TimestampBuilder).Append(arrow.Timestamp(1_780_000_000_123_456_789 + int64(r)))
		sb.FieldBuilder(1).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(r)*3 + 1))
		sb.FieldBuilder(2).(*array.BinaryBuilder).Append([]byte{0xc3, byte(r)})
		ib := sb.FieldBuilder(3).(*array.ListBuilder)
		ib.Append(true)
		ib.ValueBuilder().(*array.Int64Builder).AppendValues([]int64{int64(r), -int64(r)}, nil)
	}
	return b.NewRecordBatch()
}

// rowsOf renders every row of recs exactly (each value by its Go form, so
// a NaN, a byte or a nanosecond that changed shows), keyed by seq.
func rowsOf(t *testing.T, recs []arrow.RecordBatch) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			var row strings.Builder
			for c, col := range rec.Columns() {
				fmt.Fprintf(&row, "%s=%#v;", rec.ColumnName(c), valueOf(col, i))
			}
			seq := rec.Column(2).(*array.Int64).Value(i)
			if _, dup := out[seq]; dup {
				t.Errorf("row %d twice", seq)
			}
			out[seq] = row.String()
		}
	}
	return out
}

// valueOf is value i of a as a comparable Go value, nested types included.
func valueOf(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Float64:
		return math.Float64bits(a.Value(i))
	case *array.Float32:
		return math.Float32bits(a.Value(i))
	case *array.Binary:
		return fmt.Sprintf("%x", a.Value(i))
	case *array.List:
		start, end := a.ValueOffsets(i)
		var vs []any
		for j := start; j < end; j++ {
			vs = append(vs, valueOf(a.ListValues(), int(j)))
		}
		return fmt.Sprint(vs...)
	case *array.Map:
		start, end := a.ValueOffsets(i)
		var vs []any
		for j := start; j < end; j++ {
			vs = append(vs, valueOf(a.Keys(), int(j)), valueOf(a.Items(), int(j)))
		}
		return fmt.Sprint(vs...)
	case *array.Struct:
		var vs []any
		for f := range a.NumField() {
			vs = append(vs, valueOf(a.Field(f), i))
		}
		return fmt.Sprint(vs...)
	case *array.Decimal128:
		return a.Value(i).BigInt().String()
	case *array.Timestamp:
		return int64(a.Value(i))
	}
	return a.GetOneForMarshal(i)
}

// allTypesOrder sorts allTypes by tenant_id, trace_id, nulls last.
func allTypesOrder(t *testing.T) rowOrder {
	var o rowOrder
	for _, col := range []int{0, 1} {
		c, err := comparerOf(allTypes.Field(col).Type)
		if err != nil {
			t.Fatal(err)
		}
		o = append(o, orderKey{col: col, cmp: c})
	}
	return o
}

// Every row comes out of a spilled, level-merged sort exactly as it went
// in, and once: rows with equal and null sort keys across runs, an empty
// batch, and columns of nested types, which the sort copies through their
// text form (appendValue: ValueStr, then AppendValueFromString) — NaN and
// infinities in lists, bytes that are not UTF-8 in maps and structs,
// nanoseconds in a struct, decimals of 38 digits.
func TestExternalSortKeepsEveryValue(t *testing.T) {
	for _, tc := range []struct {
		name           string
		runBytes       int64
		fanIn, batches int
	}{
		{"one run in memory", 1 << 40, 16, 5},
		{"spilled and merged in levels", 1 << 10, 2, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TMPDIR", t.TempDir())
			defer SetCompactionMemory(tc.runBytes, 1<<10, 4<<10, tc.fanIn)()
			order := allTypesOrder(t)
			var in []arrow.RecordBatch
			for b := range tc.batches {
				in = append(in, allTypesBatch(b*37, 37))
			}
			in = append(in, allTypesBatch(0, 0)) // an empty batch
			want := rowsOf(t, in)
			recs := func(yield func(arrow.RecordBatch, error) bool) {
				for _, rec := range in {
					rec.Retain()
					if !yield(rec, nil) {
						return
					}
				}
			}
			sorted, done, err := sortRecords(t.Context(), allTypes, order, 50, recs)
			if err != nil {
				t.Fatal(err)
			}
			var out []arrow.RecordBatch
			for rec, err := range sorted {
				if err != nil {
					t.Fatal(err)
				}
				if rec.NumRows() > 50 {
					t.Errorf("a batch of %d rows, over the 50 asked", rec.NumRows())
				}
				out = append(out, rec)
			}
			got := rowsOf(t, out)
			for seq, row := range want {
				if got[seq] != row {
					t.Errorf("row %d:\n got %s\nwant %s", seq, got[seq], row)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d rows, want %d", len(got), len(want))
			}
			// In order: tenant_id, then trace_id, nulls last.
			var prev arrow.RecordBatch
			prevRow := 0
			for _, rec := range out {
				for i := range int(rec.NumRows()) {
					if prev != nil && order.compare(prev, prevRow, rec, i) > 0 {
						t.Fatalf("out of order at row %d", rec.Column(2).(*array.Int64).Value(i))
					}
					prev, prevRow = rec, i
				}
			}
			done()
			left, _ := filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "*"))
			if len(left) > 0 {
				t.Errorf("left in TMPDIR: %v", left)
			}
			for _, rec := range slices.Concat(in, out) {
				rec.Release()
			}
		})
	}
}

// Broke: a process killed while compacting (an OOM kill, a deploy) left
// its spilled runs in $TMPDIR for good, about the partition's compressed
// size each time: nothing removed a tracelake-compact-* directory but the
// sort that made it. The next sort that spills removes those of processes
// that are gone, and leaves alone the one another running compaction
// holds.
func TestExternalSortRemovesSpillsOfCrashedProcesses(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	defer SetCompactionMemory(1<<10, 1<<10, 4<<10, 4)()
	old := time.Now().Add(-time.Hour)
	plant := func(name string) string {
		dir := filepath.Join(tmp, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run-000000.arrows"), []byte("spilled"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	crashed := plant("tracelake-compact-1111")
	running := plant("tracelake-compact-2222")
	// Another process compacting right now holds its directory's lock.
	held, err := lockSpillDir(running)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	in := allTypesBatch(0, 200)
	recs := func(yield func(arrow.RecordBatch, error) bool) { yield(in, nil) }
	sorted, done, err := sortRecords(t.Context(), allTypes, allTypesOrder(t), 50, recs)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for rec, err := range sorted {
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	done()
	if rows != 200 {
		t.Errorf("%d rows, want 200", rows)
	}
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Errorf("the crashed process's spills are still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(running, "run-000000.arrows")); err != nil {
		t.Errorf("the running compaction's spills were removed: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	if len(left) != 1 {
		t.Errorf("left in TMPDIR: %v, want only %s", left, running)
	}
}
