package query

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A name is compared as DuckDB compares it, ASCII letters ignoring case
// and no other: a CTE named with the Kelvin sign (U+212A, which Go's
// Unicode lower-casing makes k) made the checker take a reference spelled
// with k for that CTE, while DuckDB binds it to no CTE: to the table of
// that name (an operator's, unviewed) or, for a file's path, to a
// replacement scan reading the file (found by a review; foldName).
func TestEscapeThroughUnicodeCaseFolding(t *testing.T) {
	l := newLake(t)
	staged := filepath.Join(l.dir, "stage", "kafka-batch.csv")
	if err := os.WriteFile(staged, []byte("tenant,secret\nb,staged-b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`CREATE TABLE kafka_raw (record_content VARCHAR); INSERT INTO kafka_raw VALUES ('raw-b')`); err != nil {
		t.Fatal(err)
	}
	kelvin := func(s string) string { return strings.ReplaceAll(s, "k", "\u212A") }
	refusedFor(t, l, []string{
		`WITH "` + kelvin(staged) + `" AS (SELECT 1 AS x) SELECT * FROM '` + staged + `'`,
		`WITH "` + kelvin("kafka_raw") + `" AS (SELECT 1 AS x) SELECT * FROM kafka_raw`,
	})
}
