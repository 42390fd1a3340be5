package query

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A scan that fails to read the warehouse (a data file gone: removed by
// hand, or by an expiry the loaded metadata predates) is the server's
// failure, not the caller's query refused: DuckDB reports the scan's
// error as its own Invalid Input, which queryError took for the query's
// mistake, so Flight SQL answered InvalidArgument and the HTTP APIs 400,
// each with the warehouse's file path unstripped (both strip the paths of
// the server's errors alone), and nothing was logged.
func TestIcebergScanFailureIsTheServersError(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	l.removeDataFiles(t, func(string) bool { return true })
	_, err := l.rows(t, tenantA, `SELECT name FROM otel_spans`)
	var re *RefusedError
	switch {
	case err == nil:
		t.Fatal("a read of removed data files succeeded")
	case errors.As(err, &re):
		t.Fatalf("a failing scan was refused as the caller's query: %v", err)
	case !errors.Is(err, fs.ErrNotExist):
		t.Fatalf("the read failed with %v, want the scan's error (a file that does not exist)", err)
	}
}

// removeDataFiles removes the warehouse's data files whose paths match,
// as an expiry the loaded metadata predates would; it fails t unless it
// removed one.
func (l *iceLake) removeDataFiles(t *testing.T, match func(path string) bool) {
	t.Helper()
	removed := 0
	err := filepath.WalkDir(filepath.Join(l.dir, "warehouse"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") && match(p) {
			removed++
			return os.Remove(p)
		}
		return err
	})
	if err != nil || removed == 0 {
		t.Fatalf("remove the data files: %v (%d removed)", err, removed)
	}
}
