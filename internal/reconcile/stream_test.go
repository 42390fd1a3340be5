package reconcile

import (
	"context"
	"database/sql"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

func TestCanonical(t *testing.T) {
	f := func(v any, dbType, want string) {
		t.Helper()
		got, err := canonical(v, dbType)
		if err != nil {
			t.Fatalf("canonical(%#v, %s): %v", v, dbType, err)
		}
		if got.text != want {
			t.Errorf("canonical(%#v, %s) = %q, want %q", v, dbType, got.text, want)
		}
	}
	f(int64(-7), "BIGINT", "-7")
	f(int32(42), "INTEGER", "42")
	f(uint64(1<<63), "BIGINT UNSIGNED", "9223372036854775808")
	f(true, "BOOLEAN", "1")
	f([]byte("12"), "INT", "12")
	f(big.NewInt(5), "HUGEINT", "5")
	f([]byte("10.50"), "DECIMAL", "10.5")
	f("-010.500", "DECIMAL(18,4)", "-10.5")
	f([]byte("-0.00"), "DECIMAL", "0")
	f([]byte("100.00"), "DECIMAL", "100")
	f([]byte("0.25"), "NUMERIC", "0.25")
	f([]byte("10.50"), "VARCHAR", "10.50") // text stays text
	f(float64(0.1), "DOUBLE", "0.1")
	f(float32(0.1), "FLOAT", "0.1")
	f("héllo", "VARCHAR", "héllo")
	at := time.Date(2024, 5, 1, 12, 11, 12, 123456000, time.FixedZone("CEST", 2*3600))
	f(at, "TIMESTAMP", "2024-05-01T10:11:12.123456Z")
	f(at.UTC(), "DATETIME", "2024-05-01T10:11:12.123456Z")
	f(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), "DATE", "2024-05-01")
	if v, err := canonical(nil, "VARCHAR"); err != nil || v.kind != kindNull {
		t.Errorf("NULL: %+v %v", v, err)
	}
	if _, err := canonical([]byte("1e5"), "DECIMAL"); err == nil {
		t.Error("1e5 taken for an exact decimal")
	}
	null, _ := canonical(nil, "VARCHAR")
	empty, _ := canonical("", "VARCHAR")
	if string(null.appendHashed(nil)) == string(empty.appendHashed(nil)) {
		t.Error("NULL and '' hash the same")
	}
	// Integers order as numbers, text as bytes.
	if compareKeys([]value{intValue(9)}, []value{intValue(10)}) >= 0 {
		t.Error("9 does not come before 10")
	}
}

func duck(t *testing.T, stmts ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1) // one in-memory database
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// CompareStreams joins two tables read in key order, one in key ranges of
// three rows, by a key of two columns: equal tables are equal; a changed
// value, a missing row, an extra row and a duplicated key are each found
// and named, and the counts and sums of both sides reported.
func TestCompareStreams(t *testing.T) {
	ctx := context.Background()
	db := duck(t,
		`CREATE TABLE a AS SELECT i // 10 AS g, 'k' || (i % 10) AS k, 'v' || i AS name, i * 1.5 AS amount FROM range(100) t(i)`,
		`CREATE TABLE b AS SELECT * FROM a ORDER BY random()`,
	)
	spec := func() StreamSpec {
		left := DuckDBTable(db, "a")
		left.Batch = 3
		return StreamSpec{Left: left, Right: DuckDBTable(db, "b"), Key: []string{"g", "k"}, Columns: []string{"g", "k", "name", "amount"}}
	}
	r, err := CompareStreams(ctx, spec())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || r.LeftRows != 100 || r.RightRows != 100 || r.LeftSum != r.RightSum || len(r.Examples) != 0 {
		t.Fatalf("identical tables reported different: %+v", r)
	}
	for _, q := range []string{
		`UPDATE b SET name = 'changed' WHERE g = 0 AND k = 'k7'`,
		`DELETE FROM b WHERE g = 0 AND k = 'k8'`,
		`INSERT INTO b VALUES (50, 'k0', 'extra', 1)`,
		`INSERT INTO b SELECT * FROM a WHERE g = 0 AND k = 'k9'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r, err = CompareStreams(ctx, spec())
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal || r.Differ != 1 || r.OnlyLeft != 1 || r.OnlyRight != 1 || r.DupRight != 1 || r.DupLeft != 0 ||
		r.RightRows != 101 || r.LeftSum == r.RightSum || r.Rechecked != 3 || r.Settled != 0 {
		t.Fatalf("report: %+v", r)
	}
	var text strings.Builder
	r.WriteText(&text)
	for _, want := range []string{"DIFFERENT", "key 0, k7: values differ", "key 0, k8: missing in b", "key 50, k0: missing in a"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
}

// changingQuerier runs change once, before the first statement that is not
// part of the scan (the scan's statements are ordered, and its reading of
// the column types reads no row; the re-reads of differing keys are
// neither): a row changes after the scan saw it.
type changingQuerier struct {
	*sql.DB
	change string
	done   atomic.Bool
}

func (q *changingQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if !strings.Contains(query, "ORDER BY") && !strings.HasSuffix(query, "LIMIT 0") && !q.done.Swap(true) {
		if _, err := q.DB.ExecContext(ctx, q.change); err != nil {
			return nil, err
		}
	}
	return q.DB.QueryContext(ctx, query, args...)
}

// A key the scan finds different is read again at the end: a row that was
// being changed (here: caught up with the other side) agrees then, and the
// report counts it as settled, not as a difference; one that still differs
// stays different.
func TestCompareStreamsRechecksDifferingKeys(t *testing.T) {
	ctx := context.Background()
	db := duck(t,
		`CREATE TABLE src AS SELECT i AS id, 'v' || i AS name FROM range(10) t(i)`,
		`CREATE TABLE model AS SELECT * FROM src`,
		`UPDATE model SET name = 'old' WHERE id IN (3, 6)`,
	)
	left := DuckDBTable(&changingQuerier{DB: db, change: `UPDATE model SET name = 'v3' WHERE id = 3`}, "src")
	left.Batch = 4
	r, err := CompareStreams(ctx, StreamSpec{Left: left, Right: DuckDBTable(db, "model"), Key: []string{"id"}, Columns: []string{"id", "name"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal || r.Rechecked != 2 || r.Settled != 1 || r.Differ != 1 || len(r.Examples) != 1 || r.Examples[0].Key != "6" {
		t.Fatalf("report: %+v", r)
	}
}

// Rate caps the rows read per second: six rows in batches of two at 20
// rows a second take at least 300ms (the fourth, empty, batch waits for
// the six rows before it).
func TestCompareStreamsRate(t *testing.T) {
	db := duck(t, `CREATE TABLE a AS SELECT i AS id FROM range(6) t(i)`)
	left := DuckDBTable(db, "a")
	left.Batch, left.Rate = 2, 20
	began := time.Now()
	r, err := CompareStreams(context.Background(), StreamSpec{Left: left, Right: DuckDBTable(db, "a"), Key: []string{"id"}, Columns: []string{"id"}})
	if err != nil || !r.Equal {
		t.Fatalf("%+v %v", r, err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("6 rows at 20 rows/s read in %s", took)
	}
}

// A table whose key order differs from the other's (here: a text key
// compared with an integer one) is an error, not a report of every key
// missing.
func TestCompareStreamsKeyOrder(t *testing.T) {
	db := duck(t, `CREATE TABLE a AS SELECT i AS id FROM range(12) t(i)`, `CREATE TABLE b AS SELECT i::VARCHAR AS id FROM range(12) t(i)`)
	_, err := CompareStreams(context.Background(), StreamSpec{Left: DuckDBTable(db, "a"), Right: DuckDBTable(db, "b"), Key: []string{"id"}, Columns: []string{"id"}})
	if err == nil || !strings.Contains(err.Error(), "key column id does not come in one order on both sides: a number in a, text in b") {
		t.Fatalf("err = %v", err)
	}
}

// A text key whose collation does not order bytes (here NOCASE: a, B, c)
// is an error naming the keys out of order.
func TestCompareStreamsCollation(t *testing.T) {
	db := duck(t, `CREATE TABLE a (k VARCHAR COLLATE NOCASE)`, `INSERT INTO a VALUES ('a'), ('B'), ('c')`,
		`CREATE TABLE b (k VARCHAR)`, `INSERT INTO b VALUES ('a'), ('B'), ('c')`)
	_, err := CompareStreams(context.Background(), StreamSpec{Left: DuckDBTable(db, "a"), Right: DuckDBTable(db, "b"), Key: []string{"k"}, Columns: []string{"k"}})
	if err == nil || !strings.Contains(err.Error(), "a does not come in key order: key (B) after (a)") {
		t.Fatalf("err = %v", err)
	}
}
