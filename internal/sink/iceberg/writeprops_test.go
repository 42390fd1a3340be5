package iceberg_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// The columns unique to each row are written without a Parquet
// dictionary (it never pays there and cost a tenth of a run's CPU); the
// others keep theirs. The values here repeat, so that the writer would
// make a dictionary of raw_data if it were left to choose.
func TestUniqueColumnsAreWrittenPlain(t *testing.T) {
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := batch(0, 0, 99)
	for _, r := range b.Records {
		r.Value = []byte(`{"same":"value in every row"}`)
	}
	load(t, s, b)
	files, err := s.DataFiles(context.Background(), false)
	if err != nil || len(files) != 1 {
		t.Fatalf("data files %v %v", files, err)
	}
	rdr, err := file.OpenParquetFile(strings.TrimPrefix(files[0].FilePath(), "file://"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	rg := rdr.MetaData().RowGroup(0)
	dict := map[string]bool{}
	for c := range rg.NumColumns() {
		chunk, err := rg.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		dict[chunk.PathInSchema().String()] = chunk.HasDictionaryPage()
	}
	want := map[string]bool{"raw_data": false, "uuid": false, "record_metadata": false, "ktopic": true}
	for col, w := range want {
		if got, ok := dict[col]; !ok || got != w {
			t.Errorf("column %s: dictionary page %v (present %v), want %v; all: %v", col, got, ok, w, dict)
		}
	}
}

// TestLoadsAreNotSortedByTheWriter: a span table declares its sort order
// when it is made, and iceberg-go's writer would sort each batch it
// writes by it (a copy of every batch, ordering nothing across files);
// loads write their rows as they came.
func TestLoadsAreNotSortedByTheWriter(t *testing.T) {
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &lookupSpans})
	ids := loadSpanIDs(t, s, 0, 1, 7, 0)
	files := spanFiles(t, s)
	if len(files) != 1 || !slices.Equal(files[0].ids, ids) {
		t.Errorf("the loaded file's trace ids are not in the order loaded (sorted: %v)", len(files) == 1 && slices.IsSorted(files[0].ids))
	}
}
