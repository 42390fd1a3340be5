package iceberg_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// A compaction's files must hold the rows of the files they replace less
// those their deletes remove: more is rows doubled, fewer rows lost,
// either refused before the commit. Deletes are counted by their record
// counts, each delete file (or deletion vector: a Puffin file and its
// offset) once however many files of the group it applies to.
func TestRewroteAll(t *testing.T) {
	file := func(content iceberggo.ManifestEntryContent, path string, rows int64, offset ...int64) iceberggo.DataFile {
		t.Helper()
		format := iceberggo.ParquetFile
		if len(offset) > 0 {
			format = iceberggo.PuffinFile
		}
		b, err := iceberggo.NewDataFileBuilder(*iceberggo.UnpartitionedSpec, content, path, format, nil, nil, nil, rows, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(offset) > 0 {
			b.ContentOffset(offset[0]).ReferencedDataFile("a.parquet")
		}
		return b.Build()
	}
	data := func(path string, rows int64) iceberggo.DataFile { return file(iceberggo.EntryContentData, path, rows) }
	posDeletes := file(iceberggo.EntryContentPosDeletes, "pos.parquet", 2)
	eqDeletes := file(iceberggo.EntryContentEqDeletes, "eq.parquet", 1)
	dvA, dvB := file(iceberggo.EntryContentPosDeletes, "dv.puffin", 1, 4), file(iceberggo.EntryContentPosDeletes, "dv.puffin", 2, 40)
	plain := []table.FileScanTask{{File: data("a.parquet", 10)}, {File: data("b.parquet", 10)}}
	withPos := []table.FileScanTask{{File: data("a.parquet", 10), DeleteFiles: []iceberggo.DataFile{posDeletes}},
		{File: data("b.parquet", 10), DeleteFiles: []iceberggo.DataFile{posDeletes}}}
	withDVs := []table.FileScanTask{{File: data("a.parquet", 10), DeletionVectorFiles: []iceberggo.DataFile{dvA}},
		{File: data("b.parquet", 10), DeletionVectorFiles: []iceberggo.DataFile{dvB}}}
	withEq := []table.FileScanTask{{File: data("a.parquet", 10), EqualityDeleteFiles: []iceberggo.DataFile{eqDeletes}},
		{File: data("b.parquet", 10)}}
	f := func(tasks []table.FileScanTask, written []int64, want string) {
		t.Helper()
		var files []iceberggo.DataFile
		for i, n := range written {
			files = append(files, data(strings.Repeat("n", i+1)+".parquet", n))
		}
		err := iceberg.RewroteAll(tasks, files)
		switch {
		case want == "" && err != nil:
			t.Errorf("%d rows written: %v, want accepted", written, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%d rows written: %v, want an error saying %q", written, err, want)
		}
	}
	f(plain, []int64{20}, "")
	f(plain, []int64{12, 8}, "")
	f(plain, []int64{12, 7}, "rows would be lost")
	f(plain, []int64{21}, "rows would be doubled")
	f(plain, nil, "rows would be lost")
	// A file planned twice holds its rows once.
	f(append(slices.Clone(plain), plain[0]), []int64{30}, "rows would be doubled")
	// The position delete file applies to both files and deletes 2 rows
	// at most, not 4.
	f(withPos, []int64{20}, "")
	f(withPos, []int64{18}, "")
	f(withPos, []int64{17}, "rows would be lost")
	f(withPos, []int64{21}, "rows would be doubled")
	// Two vectors in one Puffin file: 3 rows.
	f(withDVs, []int64{17}, "")
	f(withDVs, []int64{16}, "rows would be lost")
	// An equality delete may remove every row.
	f(withEq, nil, "")
	f(withEq, []int64{21}, "rows would be doubled")
}

// A compaction of a v3 table's files with deletion vectors (a DELETE by
// another engine) passes the rows' check: the files written hold the
// rows less those the vectors delete.
func TestCompactionOfFilesWithDeletionVectors(t *testing.T) {
	ctx := context.Background()
	s, target := bigAndSmallFiles(t)
	upgradeToV3(t, s)
	for _, off := range []int64{2003, 2004, 2015} {
		if err := s.DeleteRaw(ctx, 0, off); err != nil {
			t.Fatal(err)
		}
	}
	done, err := s.Compact(ctx, target, everyDay, false)
	if err != nil {
		t.Fatal(err)
	}
	if done[0].FilesBefore != 2 || done[0].FilesAfter != 1 {
		t.Errorf("compaction %+v: want the two small files rewritten into one", done[0])
	}
	if got, want := stored(t, s, false)[0], seq(0, 2019, 2003, 2004, 2015); !slices.Equal(got, want) {
		t.Errorf("after compaction: %d rows, want %d", len(got), len(want))
	}
}
