package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// defaultCase is a changelog column (its logical type and DuckDB type)
// and a default as a staged row holds it (sink.TableRows.Defaults).
type defaultCase struct {
	logical schema.Type
	typ     string
	v       string
}

func defaultCases() []defaultCase {
	var cs []defaultCase
	add := func(l schema.Type, typ string, vs ...string) {
		for _, v := range vs {
			cs = append(cs, defaultCase{l, typ, v})
		}
	}
	add(schema.Int32, "INTEGER", "0", "-1", "2147483647", "-2147483648")
	add(schema.Int64, "BIGINT", "0", "9223372036854775807", "-9223372036854775808")
	add(schema.Float64, "DOUBLE", "0.1", "1e-7", "-0.0", "0.0", "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308",
		"0.30000000000000004", "123456789012345678", "1e21", "1e22", "2.5e-5", "100", "-3.4028234663852886e38", "1.0000000000000002", "9007199254740993")
	add(schema.Bool, "BOOLEAN", "true", "false")
	add(schema.String, "VARCHAR", `""`, `"a'b"`, `"''"`, `"back\\slash"`, `"line\nnew\r\n"`, `"tab\there"`, `"héllo 日本 😀"`,
		`"\u00e9\ud83d\ude00"`, `"NULL"`, `"null"`, `"'; DROP TABLE x; --"`, `"$$x$$"`, `" lead and trail "`, `"\u0001ctl"`, `"quote\"d"`, `"a\u0000b"`, `"\u0000"`, `"\ud800"`)
	add(schema.Timestamp, "TIMESTAMP", "1", "-1", "1700000000123456", "-62135596800000000", "-62135596800000001", "-62167219200000000",
		"-100000000000000000", "253402300799999999", "253402300800000000", strconv.FormatInt(schema.TimestampInfinity, 10),
		strconv.FormatInt(schema.TimestampNegativeInfinity, 10))
	add(schema.JSON, "JSON", `{"a": 1, "b": [1, 2.50, "x"]}`, `"str"`, `1.0`, `12345678901234567890123`, `[]`, `{}`, `{"é":"\u00e9","q":"'"}`,
		`0.1`, `1e400`, `-0.0`, `true`, `{"a":{"b":null}}`, `"\u0000"`)
	add(schema.Decimal, "DECIMAL(10,2)", `"1.50"`, `"-0.01"`, `"0"`, `"99999999.99"`, `1.5`, `"-0"`)
	add(schema.Decimal, "DECIMAL(38,10)", `"1234567890123456789012345678.0123456789"`, `"-0.0000000001"`)
	add(schema.Decimal, "DECIMAL(38,0)", `"99999999999999999999999999999999999999"`)
	add(schema.Decimal, "DECIMAL(5,5)", `"0.12345"`)
	add(schema.Decimal, "DECIMAL(18,12)", `"123456.123456789012"`)
	add(schema.Decimal, "VARCHAR", `"3.14159265358979323846264338327950288"`, `"1E+5"`, `"-0.00"`)
	// Values no value of the type: the expression's NULL or error.
	add(schema.Int32, "INTEGER", "2147483648", "1.5", `"7"`, "true")
	add(schema.Bool, "BOOLEAN", `"yes"`, "1")
	add(schema.Timestamp, "TIMESTAMP", `"2020-01-01"`, "1.5")
	add(schema.Decimal, "DECIMAL(4,2)", `"123.45"`, `"abc"`)
	add(schema.Float64, "DOUBLE", `"NaN"`, `"Infinity"`)
	return cs
}

// A changelog column's default is the constant defaultLiteral makes of
// the value (since 831a3145) where it was the expression defaultSQL: a
// row from before the column, whether it is in the table when the column
// is added (the UPDATE of fillDefaults), is inserted without the column
// (the table's DEFAULT) or is moved later without it (the move reads the
// default as the catalog holds it, readRoutedDefaults), and after a kill
// -9 (the log replayed), reads exactly what the expression gave, for
// every type a changelog column can have.
func TestDefaultLiteralReadsWhatTheExpressionGave(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	s := openWith(t, opt)
	db := s.DB()
	cases := defaultCases()
	// show is the text of a value that tells every two apart (-0.0 and
	// 0.0, a JSON's text), with its type.
	show := func(expr string) string { return "CAST(" + expr + " AS VARCHAR) || ' :: ' || typeof(" + expr + ")" }
	want := make([]sql.NullString, len(cases))
	defs := make([]string, len(cases))
	for i, c := range cases {
		rc := readColumn{Name: "c" + strconv.Itoa(i), Logical: c.logical, Type: c.typ}
		old := defaultSQL(rc, c.v)
		var oldErr error
		if oldErr = db.QueryRowContext(ctx, "SELECT "+show("CAST("+old+" AS "+c.typ+")")).Scan(&want[i]); oldErr != nil {
			want[i] = sql.NullString{}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		def, expr, err := defaultLiteral(ctx, tx, rc, c.v, c.typ)
		tx.Rollback()
		if (err != nil) != (oldErr != nil) {
			t.Errorf("%s %s: the expression's error %v, the literal's %v", c.typ, c.v, oldErr, err)
			continue
		}
		if err != nil {
			continue
		}
		var got sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT "+show(def)).Scan(&got); err != nil {
			t.Errorf("%s default %s: the expression gave %q, the literal %q fails: %v", c.typ, c.v, want[i].String, def, err)
			continue
		}
		if !expr {
			// An expression (text holding a NUL) replays from a CREATE,
			// not from an ALTER: the sink checkpoints after such a load
			// (TestChangelogColumnDefaultWithANulCharacter).
			defs[i] = def
		}
		if got != want[i] {
			t.Errorf("%s default %s: the expression gave %q, the literal %s gives %q", c.typ, c.v, want[i].String, def, got.String)
		}
	}
	// Through the catalog: a table made with the defaults, one given them
	// by ALTER … SET DEFAULT and an UPDATE (fillDefaults), then the log
	// replayed.
	var create, add []string
	var sets []string
	for i, c := range cases {
		if defs[i] == "" {
			continue
		}
		col := sqltext.Ident("c" + strconv.Itoa(i))
		create = append(create, col+" "+c.typ+" DEFAULT "+defs[i])
		add = append(add, fmt.Sprintf("ALTER TABLE grown ADD COLUMN %s %s", col, c.typ))
		sets = append(sets, col+" = "+defs[i])
	}
	mustExec := func(db *sql.DB, q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(db, "CHECKPOINT")
	mustExec(db, "CREATE TABLE made (id INTEGER, "+joinComma(create)+")")
	mustExec(db, "INSERT INTO made (id) VALUES (1)")
	mustExec(db, "CREATE TABLE grown (id INTEGER)")
	mustExec(db, "INSERT INTO grown VALUES (1)")
	for _, q := range add {
		mustExec(db, q)
	}
	for i := range cases {
		if defs[i] != "" {
			mustExec(db, fmt.Sprintf("ALTER TABLE grown ALTER COLUMN %s SET DEFAULT %s", sqltext.Ident("c"+strconv.Itoa(i)), defs[i]))
		}
	}
	mustExec(db, "UPDATE grown SET "+joinComma(sets))
	mustExec(db, "INSERT INTO grown (id) VALUES (2)")
	check := func(db *sql.DB, when string) {
		t.Helper()
		for _, table := range []string{"made", "grown"} {
			catalog, err := ColumnDefaults(ctx, db, "main."+table)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range cases {
				if defs[i] == "" {
					continue
				}
				col := "c" + strconv.Itoa(i)
				var got, fromCatalog sql.NullString
				if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s ORDER BY id LIMIT 1", show(sqltext.Ident(col)), table)).Scan(&got); err != nil {
					t.Errorf("%s: %s %s %s: %v", when, table, c.typ, c.v, err)
					continue
				}
				if got != want[i] {
					t.Errorf("%s: %s, a row without the column, %s default %s: the expression gave %q, the row reads %q", when, table, c.typ, c.v, want[i].String, got.String)
				}
				if err := db.QueryRowContext(ctx, "SELECT "+show(catalog[col])).Scan(&fromCatalog); err != nil {
					t.Errorf("%s: %s: the catalog's default %s of %s %s: %v", when, table, catalog[col], c.typ, c.v, err)
					continue
				}
				if fromCatalog != want[i] {
					t.Errorf("%s: %s: the catalog's default %s (a move reads it) of %s %s: the expression gave %q, it gives %q", when, table, catalog[col], c.typ, c.v, want[i].String, fromCatalog.String)
				}
			}
		}
	}
	check(db, "written")
	killed := filepath.Join(t.TempDir(), "killed.duckdb")
	for _, ext := range []string{"", ".wal"} {
		b, err := os.ReadFile(opt.Path + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(killed+ext, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	again, err := sql.Open("duckdb", killed)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.PingContext(ctx); err != nil {
		t.Fatalf("the database does not open after a kill -9: %v", err)
	}
	check(again, "after a kill -9")
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += s
	}
	return out
}
