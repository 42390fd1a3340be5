package reconcile

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/reconcile/mariadbtest"
)

// huntCompare creates the table name in MariaDB (database shop) and in an
// in-memory DuckDB, fills both and reconciles the MariaDB table (read in
// batches of batch rows) with the DuckDB one over all the source's
// columns. The comparison is bounded by a deadline so that a scan that
// never ends fails instead of hanging.
func huntCompare(t *testing.T, name string, batch int, my, dk []string) (*Report, error) {
	t.Helper()
	srv := mariadbtest.Start(t)
	root := srv.Root(t, "")
	mariadbtest.Exec(t, root, append([]string{"CREATE DATABASE shop"}, my...)...)
	db := duck(t, append([]string{"SET TimeZone = 'UTC'"}, dk...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := OpenMySQL(ctx, srv.DSN("root", "", "shop")+"?socket="+srv.Socket, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.DB.Close() })
	return CompareStreams(ctx, StreamSpec{Left: src.Side(batch, 0), Right: DuckDBTable(db, name), Key: src.Key,
		Columns: src.Columns, Examples: 20})
}

func huntWantEqual(t *testing.T, r *Report, err error, rows int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("reconcile of two equal tables failed: %v", err)
	}
	if !r.Equal || r.LeftRows != rows || r.RightRows != rows {
		t.Fatalf("two equal tables reported different: %+v", *r)
	}
}

// A TIME column holding the same times on both sides (a CDC model keeps
// MariaDB's TIME as DuckDB TIME) is reported as "values differ" on every row.
func TestHuntReconcileTimeColumnEqual(t *testing.T) {
	r, err := huntCompare(t, "tm", 2,
		[]string{"CREATE TABLE shop.tm (id INT PRIMARY KEY, t TIME)", "INSERT INTO shop.tm VALUES (1,'10:11:12'),(2,'00:00:01'),(3,'23:00:00')"},
		[]string{"CREATE TABLE tm (id INTEGER PRIMARY KEY, t TIME)", "INSERT INTO tm VALUES (1,'10:11:12'),(2,'00:00:01'),(3,'23:00:00')"})
	huntWantEqual(t, r, err, 3)
}

// BIT(1), which Debezium sends as a boolean (the model's BOOLEAN), differs
// on every row: MariaDB's []byte{1} hashes as the byte 0x01, DuckDB's true as "1".
func TestHuntReconcileBitColumnEqual(t *testing.T) {
	r, err := huntCompare(t, "flags", 2,
		[]string{"CREATE TABLE shop.flags (id INT PRIMARY KEY, b BIT(1))", "INSERT INTO shop.flags VALUES (1,1),(2,0)"},
		[]string{"CREATE TABLE flags (id INTEGER PRIMARY KEY, b BOOLEAN)", "INSERT INTO flags VALUES (1,true),(2,false)"})
	huntWantEqual(t, r, err, 2)
}

// A JSON column in the model (merge.models accepts type JSON) makes the
// whole reconcile fail: DuckDB returns it as a Go map, which has no
// canonical form.
func TestHuntReconcileJSONColumn(t *testing.T) {
	r, err := huntCompare(t, "docs", 2,
		[]string{"CREATE TABLE shop.docs (id INT PRIMARY KEY, j JSON)", `INSERT INTO shop.docs VALUES (1,'{"a":1}'),(2,'[1,2]')`},
		[]string{"CREATE TABLE docs (id INTEGER PRIMARY KEY, j JSON)", `INSERT INTO docs VALUES (1,'{"a":1}'),(2,'[1,2]')`})
	huntWantEqual(t, r, err, 2)
}

// A DECIMAL primary key is ordered as text (9.5 after 10.5, and 2 as an
// integer against 10.25 as text): the equal tables cannot be reconciled,
// and the error blames a text collation.
func TestHuntReconcileDecimalKey(t *testing.T) {
	r, err := huntCompare(t, "prices", 2,
		[]string{"CREATE TABLE shop.prices (k DECIMAL(10,2) PRIMARY KEY, v INT)", "INSERT INTO shop.prices VALUES (2,1),(9.5,2),(10.25,3)"},
		[]string{"CREATE TABLE prices (k DECIMAL(10,2) PRIMARY KEY, v INTEGER)", "INSERT INTO prices VALUES (2,1),(9.5,2),(10.25,3)"})
	huntWantEqual(t, r, err, 3)
}

// A BIGINT UNSIGNED key past 2^63-1 becomes text and sorts before the
// small integers: the equal tables fail with "a text key whose collation…".
func TestHuntReconcileUnsignedBigintKey(t *testing.T) {
	r, err := huntCompare(t, "ids", 1,
		[]string{"CREATE TABLE shop.ids (k BIGINT UNSIGNED PRIMARY KEY, v INT)", "INSERT INTO shop.ids VALUES (5,1),(18446744073709551615,2)"},
		[]string{"CREATE TABLE ids (k UBIGINT PRIMARY KEY, v INTEGER)", "INSERT INTO ids VALUES (5,1),(18446744073709551615,2)"})
	huntWantEqual(t, r, err, 2)
}

// A FLOAT primary key read in batches never ends: the next batch's
// condition k > '0.1' (the canonical text) holds for the FLOAT 0.1 itself
// (0.100000001 as a double), so the same row is read again and again.
func TestHuntReconcileFloatKeyTerminates(t *testing.T) {
	r, err := huntCompare(t, "fk", 1,
		[]string{"CREATE TABLE shop.fk (k FLOAT PRIMARY KEY, v INT)", "INSERT INTO shop.fk VALUES (0.1,1),(0.2,2)"},
		[]string{"CREATE TABLE fk (k FLOAT PRIMARY KEY, v INTEGER)", "INSERT INTO fk VALUES (0.1,1),(0.2,2)"})
	huntWantEqual(t, r, err, 2)
}

// A key that is NULL in the model (a key path missing from an event) is
// a row only in the model; DuckDB sorts NULLs last while the join expects
// them first, so the reconcile fails blaming a text collation instead of
// reporting the row.
func TestHuntReconcileNullKeyInModel(t *testing.T) {
	mk := func(stmts ...string) *sql.DB { return duck(t, stmts...) }
	left := mk("CREATE TABLE a (k INTEGER, v INTEGER)", "INSERT INTO a VALUES (1,1),(2,2)")
	right := mk("CREATE TABLE b (k INTEGER, v INTEGER)", "INSERT INTO b VALUES (1,1),(2,2),(NULL,3)")
	r, err := CompareStreams(context.Background(), StreamSpec{Left: DuckDBTable(left, "a"), Right: DuckDBTable(right, "b"),
		Key: []string{"k"}, Columns: []string{"v"}})
	if err != nil {
		t.Fatalf("a NULL key in one table: %v; want it reported as a row only in b", err)
	}
	if r.OnlyRight != 1 || r.Equal {
		t.Fatalf("want one row only in b: %+v", *r)
	}
}

// utf8mb4_bin is a PAD SPACE collation: 'a\t' sorts before 'a'. The error
// then tells the user to use a _bin collation, which the key already has.
func TestHuntReconcileBinCollationPadSpace(t *testing.T) {
	_, err := huntCompare(t, "names", 1,
		[]string{"CREATE TABLE shop.names (k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT)", "INSERT INTO shop.names VALUES ('a',1),('a\\t',2),('b',3)"},
		[]string{"CREATE TABLE names (k VARCHAR PRIMARY KEY, v INTEGER)", "INSERT INTO names VALUES ('a',1),('a'||chr(9),2),('b',3)"})
	if err != nil && strings.Contains(err.Error(), "use a _bin collation") {
		t.Fatalf("the key is utf8mb4_bin, yet the error says to use a _bin collation: %v", err)
	}
}

// Compare (reconcile --left --right, in DuckDB) hashes with DuckDB's hash,
// which depends on the type: the same 1.5 as DECIMAL(12,2) and as
// DECIMAL(18,4) (a model and a copy with a wider decimal) is "values
// differ", while CompareStreams documents DECIMAL(12,2) = DECIMAL(18,4).
func TestHuntCompareDecimalScale(t *testing.T) {
	db := duck(t, "CREATE TABLE a (k INTEGER, v DECIMAL(12,2))", "INSERT INTO a VALUES (1, 1.5), (2, 10)",
		"CREATE TABLE b (k INTEGER, v DECIMAL(18,4))", "INSERT INTO b VALUES (1, 1.5), (2, 10)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("equal values of two decimal scales reported different: %+v", *r)
	}
}

// A row whose key is NULL, identical in both tables, is reported missing
// on both sides ("l.k = r.k" never matches NULL), so two identical tables
// are DIFFERENT.
func TestHuntCompareNullKeyIdentical(t *testing.T) {
	db := duck(t, "CREATE TABLE a (k INTEGER, v INTEGER)", "INSERT INTO a VALUES (1, 1), (NULL, 2)",
		"CREATE TABLE b (k INTEGER, v INTEGER)", "INSERT INTO b VALUES (1, 1), (NULL, 2)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("two identical tables (one NULL key each) reported different: %+v", *r)
	}
}
