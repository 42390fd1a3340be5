package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

var lookupSpans = schema.Table{Name: "spans", Tenant: "tenant_id", Columns: []schema.Column{
	{Name: "tenant_id", Type: schema.String}, {Name: "service_name", Type: schema.String}, {Name: "trace_id", Type: schema.String},
}}

// spanLoads loads n batches of 100 spans each (random trace ids over five
// services, one tenant) and returns one of the trace ids.
func spanLoads(t *testing.T, s *iceberg.Sink, n int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	var some string
	for l := range int64(n) {
		b := &sink.Batch{}
		r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: l, Last: l}
		for i := range 100 {
			id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
			some = id
			b.Rows = fmt.Appendf(b.Rows, `{"tenant_id":"t1","service_name":"svc%d","trace_id":%q,"ktopic":"traces","kpartition":0,"koffset":%d,"kindex":%d}`+"\n",
				rng.IntN(5), id, l, i)
			r.Records++
		}
		b.Ranges = []sink.Range{r}
		load(t, s, b)
	}
	return some
}

// TestSortedCompactionPrunesTraceLookups: the maintenance round declares
// the spans' sort order (with the trace_id bloom filter) in the table
// metadata and compacts in it, so a lookup of one trace id opens one file
// and, in it, one row group by min/max statistics; compacted in arrival
// order the same rows leave every row group holding the id's range.
func TestSortedCompactionPrunesTraceLookups(t *testing.T) {
	ctx := context.Background()
	defer iceberg.SetSortedRowGroupRows(250)()
	opt := iceberg.Options{Table: "spans", Typed: &lookupSpans}
	sorted, unsorted := openPrepared(t, t.TempDir(), opt), openPrepared(t, t.TempDir(), opt)
	// Declared when the table is made, before any round (it was declared
	// by the first maintenance round only).
	if cols, bloom, err := sorted.SortOrderColumns(ctx); err != nil || fmt.Sprint(cols) != "[tenant_id trace_id]" || !bloom {
		t.Errorf("a new span table's sort order %v, bloom filter property %v (%v); want [tenant_id trace_id] and true", cols, bloom, err)
	}
	if err := unsorted.Unsort(ctx); err != nil {
		t.Fatal(err)
	}
	id := spanLoads(t, sorted, 40)
	spanLoads(t, unsorted, 40)

	before := lookup(t, sorted, id)
	if before.files < 30 {
		t.Fatalf("before compaction the lookup opens %d of 40 files, want nearly all (arrival order)", before.files)
	}
	if _, err := sorted.NewMaintainer(roundOptions).Round(ctx); err != nil {
		t.Fatal(err)
	}
	cols, bloom, err := sorted.SortOrderColumns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cols) != "[tenant_id trace_id]" || !bloom {
		t.Errorf("declared sort order %v, bloom filter property %v; want [tenant_id trace_id] and true", cols, bloom)
	}
	if _, err := unsorted.Compact(ctx, 64<<20, everyDay, false); err != nil {
		t.Fatal(err)
	}
	got, arrival := lookup(t, sorted, id), lookup(t, unsorted, id)
	t.Logf("trace-id lookup: before compaction %+v; sorted %+v; arrival order %+v", before, got, arrival)
	if got.files != 1 || got.rowGroups != 1 || got.rows > 250 {
		t.Errorf("sorted: lookup opens %+v, want 1 file, 1 row group of at most 250 rows", got)
	}
	if arrival.rows != 4000 {
		t.Errorf("arrival order: lookup reads %+v, want all 4000 rows (every row group spans the ids)", arrival)
	}
	if !got.bloom {
		t.Error("the sorted file has no bloom filter on trace_id")
	}
	if n := len(stored(t, sorted, false)[0]); n != 40 {
		t.Errorf("%d offsets after the sorted compaction, want 40", n)
	}
}

// lookupCost is what a trace-id lookup opens: the files whose trace_id
// bounds hold the id, their row groups whose min/max do, and those row
// groups' rows.
type lookupCost struct {
	files, rowGroups int
	rows             int64
	bloom            bool
}

func lookup(t *testing.T, s *iceberg.Sink, id string) lookupCost {
	t.Helper()
	files, err := s.DataFiles(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	var c lookupCost
	for _, df := range files {
		const traceID = 3 // field id of trace_id in lookupSpans
		lo, hi := df.LowerBoundValues()[traceID], df.UpperBoundValues()[traceID]
		if bytes.Compare([]byte(id), lo) < 0 || bytes.Compare([]byte(id), hi) > 0 {
			continue
		}
		c.files++
		u, err := url.Parse(df.FilePath())
		if err != nil {
			t.Fatal(err)
		}
		r, err := file.OpenParquetFile(u.Path, false)
		if err != nil {
			t.Fatal(err)
		}
		col := r.MetaData().Schema.ColumnIndexByName("trace_id")
		for i := range r.NumRowGroups() {
			rg := r.MetaData().RowGroup(i)
			cc, err := rg.ColumnChunk(col)
			if err != nil {
				t.Fatal(err)
			}
			st, err := cc.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			bs := st.(*metadata.ByteArrayStatistics)
			if bytes.Compare([]byte(id), bs.Min()) >= 0 && bytes.Compare([]byte(id), bs.Max()) <= 0 {
				c.rowGroups++
				c.rows += rg.NumRows()
			}
			c.bloom = c.bloom || cc.BloomFilterOffset() > 0
		}
		r.Close()
	}
	return c
}
