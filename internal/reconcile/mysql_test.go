package reconcile

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/reconcile/mariadbtest"
)

// typeCases are one row per kind of value, as MariaDB and DuckDB each
// write it (the model's column types differ from the source's where CDC
// models usually do: a wider DECIMAL, TIMESTAMPTZ for TIMESTAMP, BOOLEAN
// for TINYINT(1)), and a value near it that must not hash equal.
var typeCases = []struct {
	column, mariadb, duckdb string
	value, duckValue, near  string // SQL literals
}{
	{"i", "INT", "INTEGER", "-42", "-42", "-41"},
	{"big", "BIGINT", "BIGINT", "9007199254740993", "9007199254740993", "9007199254740992"},
	{"amount", "DECIMAL(12,2)", "DECIMAL(18,4)", "'-1234.50'", "'-1234.5000'", "'-1234.51'"},
	{"whole", "DECIMAL(12,2)", "BIGINT", "'100.00'", "100", "101"},
	{"s", "VARCHAR(50)", "VARCHAR", "'Grüße, 世界'", "'Grüße, 世界'", "'grüße, 世界'"},
	{"empty", "VARCHAR(50)", "VARCHAR", "''", "''", "NULL"},
	{"nul", "VARCHAR(50)", "VARCHAR", "NULL", "NULL", "''"},
	{"dt", "DATETIME(6)", "TIMESTAMP", "'2024-05-01 10:11:12.123456'", "'2024-05-01 10:11:12.123456'", "'2024-05-01 10:11:12.123457'"},
	{"ts", "TIMESTAMP(6) NULL", "TIMESTAMPTZ", "'2024-05-01 10:11:12.5'", "'2024-05-01 12:11:12.5+02'", "'2024-05-01 11:11:12.5+02'"},
	{"d", "DATE", "DATE", "'2024-02-29'", "'2024-02-29'", "'2024-03-01'"},
	{"f", "DOUBLE", "DOUBLE", "0.1", "0.1", "0.1000000001"},
	{"flag", "TINYINT(1)", "BOOLEAN", "1", "true", "false"},
}

// Values written alike to MariaDB and to DuckDB hash alike, type by type,
// and a value near each hashes otherwise: reconciling the tables finds
// them equal, then every perturbed key different.
func TestCanonicalAcrossEngines(t *testing.T) {
	ctx := context.Background()
	srv := mariadbtest.Start(t)
	my := srv.Root(t, "")
	mariadbtest.Exec(t, my, "CREATE DATABASE shop")
	var myCols, duckCols, cols []string
	for _, c := range typeCases {
		myCols = append(myCols, c.column+" "+c.mariadb)
		duckCols = append(duckCols, c.column+" "+c.duckdb)
		cols = append(cols, c.column)
	}
	mariadbtest.Exec(t, my, "CREATE TABLE shop.t (id INT PRIMARY KEY, "+strings.Join(myCols, ", ")+")")
	db := duck(t, "CREATE TABLE t (id INTEGER PRIMARY KEY, "+strings.Join(duckCols, ", ")+")",
		"SET TimeZone = 'UTC'")
	// Row 0 holds every value; row k+1 the same with case k's near value
	// on the DuckDB side only.
	for k := -1; k < len(typeCases); k++ {
		var myVals, duckVals []string
		for i, c := range typeCases {
			myVals = append(myVals, c.value)
			if i == k {
				duckVals = append(duckVals, c.near)
			} else {
				duckVals = append(duckVals, c.duckValue)
			}
		}
		id := strconv.Itoa(k + 1)
		mariadbtest.Exec(t, my, "INSERT INTO shop.t VALUES ("+id+", "+strings.Join(myVals, ", ")+")")
		if _, err := db.Exec("INSERT INTO t VALUES (" + id + ", " + strings.Join(duckVals, ", ") + ")"); err != nil {
			t.Fatal(err)
		}
	}
	src, err := OpenMySQL(ctx, srv.DSN("root", "", "shop")+"?socket="+srv.Socket, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer src.DB.Close()
	r, err := CompareStreams(ctx, StreamSpec{Left: src.Side(4, 0), Right: DuckDBTable(db, "t"), Key: src.Key,
		Columns: append([]string{"id"}, cols...), Examples: 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.OnlyLeft+r.OnlyRight+r.DupLeft+r.DupRight != 0 || r.LeftRows != int64(len(typeCases)+1) {
		t.Fatalf("report: %+v", r)
	}
	differ := map[string]bool{}
	for _, e := range r.Examples {
		differ[e.Key] = true
	}
	if differ["0"] {
		t.Errorf("the row of equal values differs: %+v", r)
	}
	for k, c := range typeCases {
		if !differ[strconv.Itoa(k+1)] {
			t.Errorf("%s: %s and %s hash equal", c.column, c.value, c.near)
		}
	}
}

// A source that cannot be used is one error naming what is wrong, with the
// password hidden: a malformed URL, a table that does not exist, a table
// without a primary key.
func TestOpenMySQLErrors(t *testing.T) {
	ctx := context.Background()
	srv := mariadbtest.Start(t)
	mariadbtest.Exec(t, srv.Root(t, ""), "CREATE DATABASE shop", "CREATE TABLE shop.nokey (a INT, b INT)")
	good := srv.DSN("root", "", "shop") + "?socket=" + srv.Socket
	for _, c := range []struct{ source, table, want string }{
		{"mysql//u:secret@h/db", "t", `--source: want mysql://user:password@host:port/database, got "mysql//u:xxxxx@h/db"`},
		{"postgres://u:secret@h/db", "t", `--source: want mysql://user:password@host:port/database, got "postgres://u:xxxxx@h/db"`},
		{"mysql://u:secret@h:99999999/db", "t", `--source: want mysql://user:password@host:port/database, got "mysql://u:xxxxx@h:99999999/db"`},
		{"mysql://u:secret@h/db?tls=maybe", "t", "--source mysql://u:xxxxx@h/db?tls=maybe: invalid value / unknown config name: maybe"},
		{good, "missing", "source table shop.missing does not exist"},
		{good, "nokey", "source table shop.nokey has no primary key"},
		{strings.Replace(good, "/shop", "/", 1), "nokey", `--table: want database.table (or table with a database in --source), got "nokey"`},
	} {
		_, err := OpenMySQL(ctx, c.source, c.table)
		var se SourceError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s %s: %v\nwant a SourceError with %q", c.source, c.table, err, c.want)
		}
	}
}
