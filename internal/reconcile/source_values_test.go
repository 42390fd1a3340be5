package reconcile

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/reconcile/mariadbtest"
)

// compareWithMariaDB creates the table name in MariaDB (database shop) and in an
// in-memory DuckDB, fills both and reconciles the MariaDB table (read in
// batches of batch rows) with the DuckDB one over all the source's
// columns. The comparison is bounded by a deadline so that a scan that
// never ends fails instead of hanging.
func compareWithMariaDB(t *testing.T, name string, batch int, my, dk []string) (*Report, error) {
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

func wantEqual(t *testing.T, r *Report, err error, rows int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("reconcile of two equal tables failed: %v", err)
	}
	if !r.Equal || r.LeftRows != rows || r.RightRows != rows {
		t.Fatalf("two equal tables reported different: %+v", *r)
	}
}

// TIME columns holding the same times on both sides (a CDC model keeps
// MariaDB's TIME as DuckDB TIME) hash equal, fractions included, and a
// time a microsecond apart does not.
func TestSourceTimeColumnsHashAsTimeOfDay(t *testing.T) {
	r, err := compareWithMariaDB(t, "tm", 2,
		[]string{"CREATE TABLE shop.tm (id INT PRIMARY KEY, t TIME, f TIME(6))", "INSERT INTO shop.tm VALUES (1,'10:11:12','10:11:12.5'),(2,'00:00:01','00:00:01'),(3,'23:00:00','23:59:59.000001')"},
		[]string{"CREATE TABLE tm (id INTEGER PRIMARY KEY, t TIME, f TIME)", "INSERT INTO tm VALUES (1,'10:11:12','10:11:12.500'),(2,'00:00:01','00:00:01'),(3,'23:00:00','23:59:59.000001')"})
	wantEqual(t, r, err, 3)
	r, err = compareWithMariaDB(t, "tm", 2,
		[]string{"CREATE TABLE shop.tm (id INT PRIMARY KEY, f TIME(6))", "INSERT INTO shop.tm VALUES (1,'10:11:12.5')"},
		[]string{"CREATE TABLE tm (id INTEGER PRIMARY KEY, f TIME)", "INSERT INTO tm VALUES (1,'10:11:12.500001')"})
	if err != nil || r.Differ != 1 {
		t.Fatalf("times a microsecond apart: %v %+v", err, r)
	}
}

// BIT(n) hashes as the number its bits make: BIT(1), which Debezium sends
// as a boolean (the model's BOOLEAN), equals true/false, and BIT(16) an
// integer.
func TestSourceBitColumnHashesAsItsNumber(t *testing.T) {
	r, err := compareWithMariaDB(t, "flags", 2,
		[]string{"CREATE TABLE shop.flags (id INT PRIMARY KEY, b BIT(1), w BIT(16))", "INSERT INTO shop.flags VALUES (1,1,258),(2,0,0)"},
		[]string{"CREATE TABLE flags (id INTEGER PRIMARY KEY, b BOOLEAN, w INTEGER)", "INSERT INTO flags VALUES (1,true,258),(2,false,0)"})
	wantEqual(t, r, err, 2)
}

// A JSON column (merge.models accepts type JSON) hashes as compact JSON
// with sorted keys on both sides: MariaDB keeps the text as written,
// DuckDB's driver returns it decoded.
func TestSourceJSONColumnHashesCompactWithSortedKeys(t *testing.T) {
	r, err := compareWithMariaDB(t, "docs", 2,
		[]string{"CREATE TABLE shop.docs (id INT PRIMARY KEY, j JSON)", `INSERT INTO shop.docs VALUES (1,'{"b": [1, 2.0], "a":1}'),(2,'[1,2]'),(3,'"x"')`},
		[]string{"CREATE TABLE docs (id INTEGER PRIMARY KEY, j JSON)", `INSERT INTO docs VALUES (1,'{"a":1,"b":[1,2]}'),(2,'[1, 2]'),(3,'"x"')`})
	wantEqual(t, r, err, 3)
}

// A DECIMAL primary key orders as a number (2 < 9.5 < 10.25), read in
// batches whose bounds keep every digit (past a double's 17).
func TestSourceDecimalKeyOrdersAsNumber(t *testing.T) {
	r, err := compareWithMariaDB(t, "prices", 2,
		[]string{"CREATE TABLE shop.prices (k DECIMAL(30,10) PRIMARY KEY, v INT)",
			"INSERT INTO shop.prices VALUES (2,1),(9.5,2),(10.25,3),(12345678901234567890.0000000001,4),(12345678901234567890.0000000002,5)"},
		[]string{"CREATE TABLE prices (k DECIMAL(30,10) PRIMARY KEY, v INTEGER)",
			"INSERT INTO prices VALUES (2,1),(9.5,2),(10.25,3),(12345678901234567890.0000000001,4),(12345678901234567890.0000000002,5)"})
	wantEqual(t, r, err, 5)
}

// A BIGINT UNSIGNED key past 2^63-1 is a number after every signed one,
// and can be read again by key from both sides.
func TestSourceUnsignedKeyPastInt64OrdersLast(t *testing.T) {
	r, err := compareWithMariaDB(t, "ids", 1,
		[]string{"CREATE TABLE shop.ids (k BIGINT UNSIGNED PRIMARY KEY, v INT)", "INSERT INTO shop.ids VALUES (5,1),(18446744073709551615,2)"},
		[]string{"CREATE TABLE ids (k UBIGINT PRIMARY KEY, v INTEGER)", "INSERT INTO ids VALUES (5,1),(18446744073709551615,2)"})
	wantEqual(t, r, err, 2)
	// A row that differs is read again from both sides by its key: DuckDB
	// takes the bound past int64 too.
	r, err = compareWithMariaDB(t, "ids", 1,
		[]string{"CREATE TABLE shop.ids (k BIGINT UNSIGNED PRIMARY KEY, v INT)", "INSERT INTO shop.ids VALUES (5,1),(18446744073709551615,2)"},
		[]string{"CREATE TABLE ids (k UBIGINT PRIMARY KEY, v INTEGER)", "INSERT INTO ids VALUES (5,1),(18446744073709551615,3)"})
	if err != nil || r.Differ != 1 || r.Rechecked != 1 || r.Examples[0].Key != "18446744073709551615" {
		t.Fatalf("a differing row keyed past int64: %v %+v", err, r)
	}
}

// A FLOAT primary key read in batches ends: the next batch starts after
// the float read, not after its text ('0.1', less than the FLOAT 0.1 read
// as a double, which would select the same row again and again).
func TestSourceFloatKeyReadInBatchesEnds(t *testing.T) {
	r, err := compareWithMariaDB(t, "fk", 1,
		[]string{"CREATE TABLE shop.fk (k FLOAT PRIMARY KEY, v INT)", "INSERT INTO shop.fk VALUES (0.1,1),(0.2,2)"},
		[]string{"CREATE TABLE fk (k FLOAT PRIMARY KEY, v INTEGER)", "INSERT INTO fk VALUES (0.1,1),(0.2,2)"})
	wantEqual(t, r, err, 2)
}

// A key that is NULL in the model (a key path missing from an event) is
// a row only in the model, named NULL: DuckDB is read NULLS FIRST, the
// order the join expects, and the recheck finds the row by IS NULL.
func TestStreamsNullKeyIsARowOnOneSide(t *testing.T) {
	mk := func(stmts ...string) *sql.DB { return duck(t, stmts...) }
	left := mk("CREATE TABLE a (k INTEGER, v INTEGER)", "INSERT INTO a VALUES (1,1),(2,2)")
	right := mk("CREATE TABLE b (k INTEGER, v INTEGER)", "INSERT INTO b VALUES (1,1),(2,2),(NULL,3)")
	r, err := CompareStreams(context.Background(), StreamSpec{Left: DuckDBTable(left, "a"), Right: DuckDBTable(right, "b"),
		Key: []string{"k"}, Columns: []string{"v"}})
	if err != nil {
		t.Fatalf("a NULL key in one table: %v; want it reported as a row only in b", err)
	}
	if r.OnlyRight != 1 || r.Equal || len(r.Examples) != 1 || r.Examples[0].Key != "NULL" {
		t.Fatalf("want one row only in b, key NULL: %+v", *r)
	}
}

// utf8mb4_bin is a PAD SPACE collation: 'a\t' sorts before 'a'. The error
// advises a NO PAD collation or VARBINARY, not the _bin collation the key
// already has.
func TestSourcePadSpaceCollationErrorAdvisesNoPad(t *testing.T) {
	_, err := compareWithMariaDB(t, "names", 1,
		[]string{"CREATE TABLE shop.names (k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT)", "INSERT INTO shop.names VALUES ('a',1),('a\\t',2),('b',3)"},
		[]string{"CREATE TABLE names (k VARCHAR PRIMARY KEY, v INTEGER)", "INSERT INTO names VALUES ('a',1),('a'||chr(9),2),('b',3)"})
	if err == nil || !strings.Contains(err.Error(), "text key column k") || !strings.Contains(err.Error(), "NO PAD") ||
		!strings.Contains(err.Error(), "VARBINARY") {
		t.Fatalf("a utf8mb4_bin key out of byte order: %v; want an error naming k and advising a NO PAD collation or VARBINARY", err)
	}
	// The advice holds: the same keys in utf8mb4_nopad_bin come in byte order.
	r, err := compareWithMariaDB(t, "names", 1,
		[]string{"CREATE TABLE shop.names (k VARCHAR(10) COLLATE utf8mb4_nopad_bin PRIMARY KEY, v INT)", "INSERT INTO shop.names VALUES ('a',1),('a\\t',2),('b',3)"},
		[]string{"CREATE TABLE names (k VARCHAR PRIMARY KEY, v INTEGER)", "INSERT INTO names VALUES ('a',1),('a'||chr(9),2),('b',3)"})
	wantEqual(t, r, err, 3)
}

// A number compares as the number it is whichever type the model keeps
// it as: a source DOUBLE 1e7 equals a model DECIMAL 10000000 (a float was
// hashed by its shortest text, "1e+07"), and a source DECIMAL 10.50 a
// model VARCHAR '10.50' (change capture keeps a number it could not type
// as its text) — while 10000001, '10.51', text that is no number, and two
// text columns that spell one number two ways still differ.
func TestSourceNumbersEqualTheModelsNumbersOfOtherTypes(t *testing.T) {
	my := []string{"CREATE TABLE shop.num (id INT PRIMARY KEY, d DOUBLE, m DECIMAL(10,2), f DOUBLE, z DOUBLE, s VARCHAR(10))",
		"INSERT INTO shop.num VALUES (1, 1e7, 10.50, 0.1, -0.0, '10.50'), (2, 2.5e-7, -3.00, 1e21, 0, 'x')"}
	model := func(row1, row2 string) []string {
		return []string{"CREATE TABLE num (id INTEGER PRIMARY KEY, d DECIMAL(20,9), m VARCHAR, f DOUBLE, z DECIMAL(4,1), s VARCHAR)",
			"INSERT INTO num VALUES " + row1 + ", " + row2}
	}
	same := model("(1, 10000000, '10.50', 0.1, 0, '10.50')", "(2, 0.00000025, '-3', 1e21, 0.0, 'x')")
	r, err := compareWithMariaDB(t, "num", 1, my, same)
	wantEqual(t, r, err, 2)
	for _, c := range []struct{ name, row1 string }{
		{"another number", "(1, 10000001, '10.50', 0.1, 0, '10.50')"},
		{"another number as text", "(1, 10000000, '10.51', 0.1, 0, '10.50')"},
		{"text that is no number", "(1, 10000000, '10.5x', 0.1, 0, '10.50')"},
		{"a number spelt otherwise in text on both sides", "(1, 10000000, '10.50', 0.1, 0, '10.5')"},
	} {
		r, err := compareWithMariaDB(t, "num", 1, my, model(c.row1, "(2, 0.00000025, '-3', 1e21, 0.0, 'x')"))
		if err != nil || r.Differ != 1 {
			t.Errorf("%s: %v %+v", c.name, err, r)
		}
	}
}
