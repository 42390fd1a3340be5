package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// fatSpans are lookupSpans with attributes of a few hundred bytes, so that
// a row group's bytes are mostly rows, as with real spans, not footer.
var fatSpans = schema.Table{Name: "spans", Tenant: "tenant_id", Columns: append(slices.Clone(lookupSpans.Columns),
	schema.Column{Name: "attributes", Type: schema.String})}

// loadSpanIDs loads n batches of 100 spans (random trace ids, one tenant,
// from offset first on; with attrs random bytes of attributes if the
// table has them) and returns every trace id loaded.
func loadSpanIDs(t *testing.T, s *iceberg.Sink, first, n int64, seed uint64, attrs int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	var ids []string
	for l := first; l < first+n; l++ {
		b := &sink.Batch{}
		r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: l, Last: l}
		for i := range 100 {
			id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
			ids = append(ids, id)
			attr := make([]byte, attrs/2)
			for j := range attr {
				attr[j] = byte(rng.Uint32())
			}
			b.Rows = fmt.Appendf(b.Rows, `{"tenant_id":"t1","service_name":"svc%d","trace_id":%q,"attributes":"%x","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":%d}`+"\n",
				rng.IntN(5), id, attr, l, i)
			r.Records++
		}
		b.Ranges = []sink.Range{r}
		load(t, s, b)
	}
	return ids
}

// spanFile is what a test reads back of one data file.
type spanFile struct {
	size, maxRowGroup int64
	ids               []string
}

// spanFiles reads the trace ids of each data file of s's span table.
func spanFiles(t *testing.T, s *iceberg.Sink) []spanFile {
	t.Helper()
	files, err := s.DataFiles(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	var out []spanFile
	for _, df := range files {
		r, err := file.OpenParquetFile(strings.TrimPrefix(df.FilePath(), "file://"), false)
		if err != nil {
			t.Fatal(err)
		}
		f := spanFile{size: df.FileSizeBytes()}
		for i := range r.NumRowGroups() {
			f.maxRowGroup = max(f.maxRowGroup, r.MetaData().RowGroup(i).TotalCompressedSize())
		}
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tbl.Column(tbl.Schema().FieldIndices("trace_id")[0]).Data().Chunks() {
			a := c.(*array.String)
			for i := range a.Len() {
				f.ids = append(f.ids, a.Value(i))
			}
		}
		tbl.Release()
		r.Close()
		out = append(out, f)
	}
	return out
}

// checkSortedOnce checks that files hold every id of want once, each file
// sorted and the files' ranges apart (one tenant: trace id order).
func checkSortedOnce(t *testing.T, files []spanFile, want []string) {
	t.Helper()
	var all []string
	for _, f := range files {
		if !slices.IsSorted(f.ids) {
			t.Errorf("a file of %d rows is not in trace-id order", len(f.ids))
		}
		all = append(all, f.ids...)
	}
	slices.SortFunc(files, func(a, b spanFile) int { return strings.Compare(a.ids[0], b.ids[0]) })
	for i := 1; i < len(files); i++ {
		if prev := files[i-1].ids; prev[len(prev)-1] > files[i].ids[0] {
			t.Errorf("files %d and %d overlap: ..%s and %s..", i-1, i, prev[len(prev)-1], files[i].ids[0])
		}
	}
	slices.Sort(all)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(all, want) {
		t.Errorf("%d rows after compaction, want the %d loaded, each once", len(all), len(want))
	}
}

// TestSortedCompactionRollsAtTheTargetSize: a day partition of many times
// the target is compacted into several files, each within a row group of
// the target, in order, their trace-id ranges apart, every row once.
// Before, the whole group went into one file: for a 128 MiB target one of
// 448 MB, 305 row groups each with a 1 MiB bloom filter that the writer's
// roll never counted (docs/BENCHMARKS.md, "iceberg_trace_by_id").
func TestSortedCompactionRollsAtTheTargetSize(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &fatSpans})
	ids := loadSpanIDs(t, s, 0, 250, 1, 400)
	const target = 2 << 20
	opt := roundOptions
	opt.TargetFileBytes = target
	r, err := s.NewMaintainer(opt).Round(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := spanFiles(t, s)
	t.Logf("round %+v; %d files", r.Compacted, len(files))
	for i, f := range files {
		t.Logf("file %d: %d bytes, %d rows, largest row group %d bytes", i, f.size, len(f.ids), f.maxRowGroup)
	}
	if r.Compacted[0].FilesBefore != 250 || len(files) < 3 || r.Compacted[0].FilesAfter != len(files) {
		t.Fatalf("compacted %+v into %d files, want the 250 files of the day into several", r.Compacted[0], len(files))
	}
	slack := iceberg.RowGroupBytesOf(target)
	for i, f := range files {
		if f.size > target+f.maxRowGroup {
			t.Errorf("file %d: %d bytes, over the target %d by more than a row group (%d)", i, f.size, target, f.maxRowGroup)
		}
		if f.maxRowGroup > slack*5/4 {
			t.Errorf("file %d: a row group of %d bytes, want about %d at most", i, f.maxRowGroup, slack)
		}
	}
	for _, f := range files[:len(files)-1] {
		if f.size < target*3/4 {
			t.Errorf("a file of %d bytes, under 3/4 of the target: the next round would compact it again", f.size)
		}
	}
	checkSortedOnce(t, files, ids)
}

// TestSortedCompactionMemoryIsBounded: compaction holds about the same
// rows at once for a partition three times as large, a small part of
// either: with sorted runs of a few hundred rows, spilled and merged four
// at a time (more runs than that: merged in two levels). Before, the
// whole group was read into memory to be sorted.
func TestSortedCompactionMemoryIsBounded(t *testing.T) {
	ctx := context.Background()
	defer iceberg.SetSortedRowGroupRows(250)()
	defer iceberg.SetCompactionMemory(16<<10, 4<<10, 8<<10, 4)()
	peak := map[int64]int64{}
	for _, loads := range []int64{20, 60} {
		s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &lookupSpans})
		ids := loadSpanIDs(t, s, 0, loads, uint64(loads), 0)
		opt := roundOptions
		opt.TargetFileBytes = 64 << 10
		if _, err := s.NewMaintainer(opt).Round(ctx); err != nil {
			t.Fatal(err)
		}
		peak[loads] = iceberg.PeakRowsHeld()
		t.Logf("%d rows: at most %d held at once", len(ids), peak[loads])
		checkSortedOnce(t, spanFiles(t, s), ids)
		if peak[loads] > int64(len(ids))/4 {
			t.Errorf("%d rows held at once of %d: want a bounded part", peak[loads], len(ids))
		}
	}
	if peak[60] > peak[20]*5/4 {
		t.Errorf("rows held at once: %d for 6,000 rows, %d for 2,000; want about the same", peak[60], peak[20])
	}
}
