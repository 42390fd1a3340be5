package iceberg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
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
