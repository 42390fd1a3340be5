package reconcile

import (
	"context"
	"testing"
	"time"
)

// Compare (reconcile --left --right, in DuckDB) hashes a canonical form
// of each column, not the value itself (DuckDB's hash depends on the
// type): 1.5 as DECIMAL(12,2) equals 1.5 as DECIMAL(18,4), 7 as INTEGER 7
// as BIGINT, true 1, as CompareStreams has it; 1.5 and 1.25 still differ.
func TestCompareHashesEqualValuesOfCompatibleTypesEqual(t *testing.T) {
	db := duck(t, "CREATE TABLE a (k INTEGER, v DECIMAL(12,2), n INTEGER, f BOOLEAN, z DECIMAL(10,0))", "INSERT INTO a VALUES (1, 1.5, 7, true, 100), (2, 10, 8, false, 0)",
		"CREATE TABLE b (k INTEGER, v DECIMAL(18,4), n BIGINT, f TINYINT, z BIGINT)", "INSERT INTO b VALUES (1, 1.5, 7, 1, 100), (2, 10, 8, 0, 0)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("equal values of compatible types reported different: %+v", *r)
	}
	if _, err := db.Exec("UPDATE b SET v = 1.25 WHERE k = 1"); err != nil {
		t.Fatal(err)
	}
	if r, err = Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}}); err != nil || r.Differ != 1 {
		t.Fatalf("1.5 and 1.25: %v %+v", err, r)
	}
}

// A DOUBLE holding a whole number hashes as the integer or decimal column
// of the same value does (DuckDB writes 10000000.0, or 1e+16); a fraction
// as a decimal's text. Both were reported different: a model's DOUBLE
// against a table's DECIMAL or BIGINT of the same numbers.
func TestCompareHashesWholeDoublesAsIntegers(t *testing.T) {
	db := duck(t, "CREATE TABLE a (k INTEGER, d DOUBLE, e DOUBLE, f FLOAT, g DOUBLE)",
		"INSERT INTO a VALUES (1, 1e7, 7, 1.5, 1e16), (2, -3, 0.25, -2, 'NaN')",
		"CREATE TABLE b (k INTEGER, d DECIMAL(12,2), e BIGINT, f DECIMAL(5,2), g HUGEINT)",
		"INSERT INTO b VALUES (1, 10000000.00, 7, 1.50, 10000000000000000), (2, -3, 0, -2, NULL)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}, Columns: []string{"k", "d", "f"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("whole doubles against decimals of the same values reported different: %+v", *r)
	}
	r, err = Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}, Columns: []string{"k", "e", "g"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Differ != 1 || len(r.Examples) != 1 || r.Examples[0].Key != "2" {
		t.Fatalf("7 and 1e16 as doubles against integers: want key 2 alone different (0.25 against 0, NaN against NULL), got %+v", *r)
	}
}

// A row whose key is NULL is joined to the other side's (IS NOT DISTINCT
// FROM): two identical tables are equal, and a NULL key that differs is
// shown as NULL.
func TestCompareJoinsNullKeys(t *testing.T) {
	db := duck(t, "CREATE TABLE a (k INTEGER, v INTEGER)", "INSERT INTO a VALUES (1, 1), (NULL, 2)",
		"CREATE TABLE b (k INTEGER, v INTEGER)", "INSERT INTO b VALUES (1, 1), (NULL, 2)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Fatalf("two identical tables (one NULL key each) reported different: %+v", *r)
	}
	if _, err := db.Exec("UPDATE b SET v = 3 WHERE k IS NULL"); err != nil {
		t.Fatal(err)
	}
	r, err = Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}})
	if err != nil || r.Differ != 1 || len(r.Examples) != 1 || r.Examples[0].Key != "NULL" || r.Examples[0].Problem != "values differ" {
		t.Fatalf("a NULL key whose values differ: %v %+v", err, r)
	}
}

// Text read as a number (a text column against a numeric one) is the
// number's canonical text when it is decimal digits, with an exponent or
// not (each of those below is written otherwise than its canonical text),
// and stays text otherwise (Go's fractions and hexadecimal too).
func TestNumberInTextIsTheNumber(t *testing.T) {
	for in, want := range map[string]string{"1e+07": "10000000", "25e-8": "0.00000025", "-0.0e3": "0", "+.5E1": "5",
		"10.50": "10.5", "-3.": "-3", "1.25e1": "12.5", "1e7x": "1e7x", "0x10": "0x10", "1/3": "1/3", "": "", " 1": " 1"} {
		v, err := canonical(in, numberInText)
		if err != nil || v.text != want {
			t.Errorf("%q: %q %v, want %q", in, v.text, err, want)
		}
		if isNumber := want != in; isNumber != (v.kind == kindNumber) {
			t.Errorf("%q read as %s", in, v.kind)
		}
	}
}

// Tables whose names hold a quote are compared, and the examples name
// them as they are (the names were written into the examples' query as
// they are: a syntax error).
func TestCompareTablesNamedWithAQuote(t *testing.T) {
	db := duck(t, `CREATE TABLE "o'a" (k INTEGER, v INTEGER)`, `INSERT INTO "o'a" VALUES (1, 1), (2, 2)`,
		`CREATE TABLE "o'b" (k INTEGER, v INTEGER)`, `INSERT INTO "o'b" VALUES (1, 1)`)
	r, err := Compare(context.Background(), db, Spec{Left: "o'a", Right: "o'b", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.OnlyLeft != 1 || len(r.Examples) != 1 || r.Examples[0].Problem != "missing in o'b" {
		t.Fatalf("want key 2 missing in o'b, got %+v", *r)
	}
}

// A changelog model's TIMESTAMP at midnight is the source's DATE, and
// another time of that day is not; its BIGINT of µs is the source's TIME,
// negative and past 24 hours too, as MariaDB writes them.
func TestCanonicalDatesAndTimesOfChangeCapture(t *testing.T) {
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v        any
		typ      string
		same     any
		sameType string
		equal    bool
	}{
		{day, dateInTimestamp, "2024-05-01", "DATE", true},
		{day.Add(time.Microsecond), dateInTimestamp, "2024-05-01", "DATE", false},
		{int64(36672500000), timeInMicros, []byte("10:11:12.500000"), "TIME", true},
		{int64(-45000000000), timeInMicros, []byte("-12:30:00"), "TIME", true},
		{int64(3020399000000), timeInMicros, []byte("838:59:59"), "TIME", true},
		{int64(-1), timeInMicros, []byte("-00:00:00.000001"), "TIME", true},
		{int64(-45001000000), timeInMicros, []byte("-12:30:00"), "TIME", false},
	} {
		a, err := canonical(c.v, c.typ)
		if err != nil {
			t.Fatal(err)
		}
		b, err := canonical(c.same, c.sameType)
		if err != nil {
			t.Fatal(err)
		}
		if (a.text == b.text) != c.equal {
			t.Errorf("%v as %s is %q, %v as %s is %q: want equal %v", c.v, c.typ, a.text, c.same, c.sameType, b.text, c.equal)
		}
	}
}
