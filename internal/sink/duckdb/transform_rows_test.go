package duckdb

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// loadTransformed loads values (offsets 0…) of partition 0 into a transform
// table made by ddl, and returns the table's rows (sorted, "a|b") and the
// offsets dead-lettered.
func loadTransformed(t *testing.T, ddl, query string, values ...string) (rows []string, dlq []string) {
	t.Helper()
	s := openTransformed(t, ddl)
	loadValues(t, s, 0, values...)
	return scanPairs(t, s, query), scanPairs(t, s, `SELECT "offset", error FROM orders_dlq`)
}

// openTransformed opens a transform-mode sink on the table orders, which
// ddl (statements split at ";") makes.
func openTransformed(t *testing.T, ddl string) *Sink {
	t.Helper()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Transform = "orders", true
	s := openWith(t, opt)
	for _, q := range strings.Split(ddl, ";") {
		if strings.TrimSpace(q) == "" {
			continue
		}
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// loadValues loads values as one load, partition 0 from offset first on.
func loadValues(t *testing.T, s *Sink, first int64, values ...string) {
	t.Helper()
	ctx := context.Background()
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: first + int64(len(values)) - 1, Records: int64(len(values))}}}
	for i, v := range values {
		b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "t", Offset: first + int64(i), Value: []byte(v)}, envelope.ValueText)
	}
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
}

// scanPairs is the rows of a query of two columns, "a|b", sorted byte-wise.
func scanPairs(t *testing.T, s *Sink, q string) []string {
	t.Helper()
	r, err := s.DB().Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var a, b any
		if err := r.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%v|%v", a, b))
	}
	sort.Strings(out)
	return out
}

// README, "Transform mode": "JSON, list, struct and map columns cast the
// field's JSON"; a field that does not cast goes to the DLQ at stage load.
// TRY_CAST of a list/struct/map yields a value with NULL in place of the
// element that does not cast, not NULL: such an object goes to the DLQ
// too, not stored with the element replaced by NULL.
func TestTransformDeadLettersAListStructOrMapElementThatDoesNotCast(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, qty INTEGER[], dims STRUCT(w INTEGER), attrs MAP(VARCHAR, INTEGER))`,
		`SELECT id, coalesce(qty::VARCHAR, '') || ';' || coalesce(dims::VARCHAR, '') || ';' || coalesce(attrs::VARCHAR, '') FROM orders`,
		`{"id":1,"qty":[1,"x"]}`,
		`{"id":2,"dims":{"w":"wide"}}`,
		`{"id":3,"attrs":{"k":"v"}}`,
		`{"id":4,"qty":[1,2],"dims":{"w":3},"attrs":{"k":5}}`,
	)
	if want := []string{"4|[1, 2];{'w': 3};{k=5}"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v (objects 0-2 dead-lettered); dead letters: %v", rows, want, dlq)
	}
	if len(dlq) != 3 {
		t.Errorf("dead letters = %v, want offsets 0, 1, 2", dlq)
	}
}

// README, "Transform mode": an object the table rejects goes to the DLQ —
// "a primary-key or unique key already in the table or in an object
// inserted earlier in the same load". An earlier object of the load that is itself dead-lettered (a
// failing CHECK) is not in the table: the next object with its key loads,
// it is no duplicate of a row that was never stored.
func TestTransformKeyOfADeadLetteredObjectIsNoDuplicate(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT PRIMARY KEY, amount INTEGER CHECK (amount > 0))`,
		`SELECT id, amount FROM orders`,
		`{"id":1,"amount":-5}`, // CHECK fails: dead-lettered
		`{"id":1,"amount":7}`,  // the corrected change: must load
	)
	if want := []string{"1|7"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters: %v", rows, want, dlq)
	}
	if len(dlq) != 1 || !strings.HasPrefix(dlq[0], "0|") {
		t.Errorf("dead letters = %v, want only offset 0 (CHECK)", dlq)
	}
}

// The same with two keys: object 1 duplicates object 0's primary key and
// is dead-lettered; object 2 has a new id and object 1's email — object 1
// was never stored, so object 2 loads.
func TestTransformUniqueKeyOfAnObjectRefusedForAnotherKeyIsNoDuplicate(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT PRIMARY KEY, email VARCHAR UNIQUE)`,
		`SELECT id, email FROM orders`,
		`{"id":1,"email":"a"}`,
		`{"id":1,"email":"b"}`, // duplicate id: dead-lettered
		`{"id":2,"email":"b"}`, // b is in no stored row: must load
	)
	if want := []string{"1|a", "2|b"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters: %v", rows, want, dlq)
	}
}

// A timestamp with a zone offset into a TIMESTAMP column: 10:00+02:00 is
// 08:00 UTC. DuckDB's cast of the text drops the offset and would store
// 10:00, a wrong instant.
func TestTransformStoresATimestampWithAnOffsetInUTC(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, ts TIMESTAMP)`,
		`SELECT id, ts::VARCHAR FROM orders`,
		`{"id":1,"ts":"2024-01-01T10:00:00+02:00"}`,
	)
	if want := []string{"1|2024-01-01 08:00:00"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters: %v", rows, want, dlq)
	}
}

// README, "Transform mode": "fields are matched to columns by name". A
// column added to the user's table while tracelake runs is filled from the
// next load on: the load sees the table changed and reads it again, rather
// than dropping the new field silently.
func TestTransformFillsAColumnAddedWhileRunning(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Transform = "orders", true
	s := openWith(t, opt)
	if _, err := s.DB().Exec(`CREATE TABLE orders (id BIGINT)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`ALTER TABLE orders ADD COLUMN note VARCHAR`); err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 0, Records: 1}}}
	b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "t", Offset: 0, Value: []byte(`{"id":1,"note":"hello"}`)}, envelope.ValueText)
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	var note *string
	if err := s.DB().QueryRow(`SELECT note FROM orders WHERE id = 1`).Scan(&note); err != nil {
		t.Fatal(err)
	}
	if note == nil || *note != "hello" {
		t.Errorf("note = %v, want hello (the field was dropped silently)", note)
	}
}

// A user table with a generated column loads: the column is not a field to
// fill (using its expression as a default failed every load, retried
// forever).
func TestTransformLoadsATableWithAGeneratedColumn(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, dbl BIGINT GENERATED ALWAYS AS (id * 2))`,
		`SELECT id, dbl FROM orders`,
		`{"id":2}`,
	)
	if want := []string{"2|4"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters %v", rows, want, dlq)
	}
}

// A number with a fraction into an integer column is refused, not rounded:
// DuckDB's cast of the text '1.5' to BIGINT is 2, so object 0 was stored
// as id 2 (another value than was sent) and the real id 2 at offset 1 was
// dead-lettered as its duplicate. Merges already refuse such a value
// (sqltext.FractionLost); transform mode stored it.
func TestTransformRefusesAFractionIntoAnIntegerColumn(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT PRIMARY KEY, qty INTEGER)`,
		`SELECT id, qty FROM orders`,
		`{"id":1.5,"qty":1}`,
		`{"id":2,"qty":2}`,
		`{"id":3,"qty":"2.5"}`,
		`{"id":4,"qty":4.0}`, // no fraction lost: loads
	)
	if want := []string{"2|2", "4|4"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters: %v", rows, want, dlq)
	}
	if len(dlq) != 2 || !strings.HasPrefix(dlq[0], "0|column id (BIGINT)") || !strings.HasPrefix(dlq[1], "2|column qty (INTEGER)") ||
		!strings.Contains(dlq[0], "rounding") {
		t.Errorf("dead letters = %v, want offsets 0 (id) and 2 (qty), refused for rounding", dlq)
	}
}

// The same inside a list, struct or map: DuckDB's cast of the JSON number
// 1.5 to an INTEGER element is 2, so [1.5] was stored as [2] and
// {"w":2.5} as {'w': 2}, values that were never sent.
func TestTransformRefusesAFractionIntoAnIntegerElement(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, qty INTEGER[], dims STRUCT(w INTEGER, label VARCHAR), attrs MAP(VARCHAR, BIGINT))`,
		`SELECT id, coalesce(qty::VARCHAR, '') || ';' || coalesce(dims::VARCHAR, '') || ';' || coalesce(attrs::VARCHAR, '') FROM orders`,
		`{"id":1,"qty":[1.5]}`,
		`{"id":2,"dims":{"w":2.5,"label":"x"}}`,
		`{"id":3,"attrs":{"k":0.5}}`,
		`{"id":4,"qty":[1,2.0,null],"dims":{"w":3,"label":"1.50"},"attrs":{"k":5}}`,
	)
	if want := []string{"4|[1, 2, NULL];{'w': 3, 'label': 1.50};{k=5}"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v (objects 0-2 dead-lettered); dead letters: %v", rows, want, dlq)
	}
	if len(dlq) != 3 {
		t.Errorf("dead letters = %v, want offsets 0, 1, 2", dlq)
	}
}

// A key column with a collation (VARCHAR COLLATE NOCASE): DuckDB's own
// index compares its values as bytes, so "a" and "A" are two keys (two
// INSERTs both succeed, and both objects in one load are stored). The
// check of a key already in the table compared them under the column's
// collation: "A" loaded after "a" was dead-lettered as a duplicate, a row
// lost depending only on whether the two objects shared a load.
func TestTransformKeyWithACollationIsADuplicateOnlyAsTheIndexSaysSo(t *testing.T) {
	s := openTransformed(t, `CREATE TABLE orders (id VARCHAR COLLATE NOCASE PRIMARY KEY, v INTEGER)`)
	for i, v := range []string{`{"id":"a","v":1}`, `{"id":"A","v":2}`, `{"id":"A","v":3}`} {
		loadValues(t, s, int64(i), v) // one load each
	}
	rows := scanPairs(t, s, `SELECT id, v FROM orders`)
	dlq := scanPairs(t, s, `SELECT "offset", 'dup' FROM orders_dlq`)
	if want := []string{"A|2", "a|1"}; !slices.Equal(rows, want) || !slices.Equal(dlq, []string{"2|dup"}) {
		t.Errorf("orders = %v, dead letters = %v; want %v and offset 2 (a true duplicate of A)", rows, dlq, want)
	}
}

// A foreign key to a text key with a collation: DuckDB looks the
// referenced row up byte for byte, so "A" has no row where only "a" is.
// The check compared under the referenced column's NOCASE collation, let
// the object through, and the INSERT failed the whole load — retried with
// the same rows forever, the partition stalled.
func TestTransformForeignKeyToACollatedKeyIsLookedUpAsTheIndexDoes(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE customers (name VARCHAR COLLATE NOCASE PRIMARY KEY); INSERT INTO customers VALUES ('a');
		CREATE TABLE orders (id INTEGER, customer VARCHAR REFERENCES customers (name))`,
		`SELECT id, customer FROM orders`,
		`{"id":1,"customer":"a"}`,
		`{"id":2,"customer":"A"}`,
	)
	if want := []string{"1|a"}; !slices.Equal(rows, want) || len(dlq) != 1 || !strings.HasPrefix(dlq[0], "1|") {
		t.Errorf("orders = %v, dead letters = %v; want %v and offset 1 (no customer A)", rows, dlq, want)
	}
}

// A CHECK over a text column with a collation: DuckDB evaluates it under
// the column's collation, so "ABC" passes CHECK (name IN ('abc')) on a
// COLLATE NOCASE column (an INSERT of it succeeds). The check evaluated
// the expression over the bare value and dead-lettered the object, a row
// DuckDB would have stored.
func TestTransformCheckOverACollatedColumnIsEvaluatedAsDuckDBDoes(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id INTEGER, name VARCHAR COLLATE NOCASE CHECK (name IN ('abc', 'def')))`,
		`SELECT id, name FROM orders`,
		`{"id":1,"name":"abc"}`,
		`{"id":2,"name":"ABC"}`,
		`{"id":3,"name":"xyz"}`,
	)
	if want := []string{"1|abc", "2|ABC"}; !slices.Equal(rows, want) || len(dlq) != 1 || !strings.HasPrefix(dlq[0], "2|") {
		t.Errorf("orders = %v, dead letters = %v; want %v and offset 2 (xyz)", rows, dlq, want)
	}
}

// A CHECK that names a column twice: DuckDB lists the column once per
// mention, and the row's values are unioned by name under the table's
// columns, which takes each name once.
func TestTransformCheckNamingAColumnTwice(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id INTEGER, amount INTEGER, CHECK (amount > 0 AND amount < 100 AND id < amount))`,
		`SELECT id, amount FROM orders`,
		`{"id":1,"amount":5}`,
		`{"id":2,"amount":500}`,
		`{"id":9,"amount":5}`,
	)
	if want := []string{"1|5"}; !slices.Equal(rows, want) || len(dlq) != 2 {
		t.Errorf("orders = %v, dead letters = %v; want %v and offsets 1, 2", rows, dlq, want)
	}
}

// A whole number in a HUGEINT or UHUGEINT element is not a fraction,
// however large: 27670116110564329473 (2^64 + 2^63 + 2049) casts to HUGEINT
// exactly, but the fraction check compared the JSON number cast to DOUBLE
// (2.767011611056433e+19, rounded once) with the HUGEINT cast to DOUBLE
// (2.7670116110564327e+19: DuckDB rounds the two halves of a HUGEINT
// separately), which differ, so the object was dead-lettered as rounded.
func TestTransformLoadsAWholeHugeintElement(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, big HUGEINT[], ubig STRUCT(u UHUGEINT))`,
		`SELECT id, big::VARCHAR || ';' || ubig::VARCHAR FROM orders`,
		`{"id":1,"big":[27670116110564329473, -27670116110564329473],"ubig":{"u":27670116110564329473}}`,
		`{"id":2,"big":[1.5],"ubig":{"u":1}}`, // a fraction: refused
	)
	want := []string{"1|[27670116110564329473, -27670116110564329473];{'u': 27670116110564329473}"}
	if !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters: %v", rows, want, dlq)
	}
	if len(dlq) != 1 || !strings.HasPrefix(dlq[0], "1|") {
		t.Errorf("dead letters = %v, want offset 1 alone", dlq)
	}
}

// A field given twice in one object: DuckDB's JSON reader takes the first
// value, Databend's COPY the last (and matches a field to a column in any
// case), so the same message stored id 1 here and 2 there. Both sinks
// dead-letter such an object instead, with the reason; a field of no
// column given twice is ignored, as the field itself is.
func TestTransformDeadLettersAColumnFieldGivenTwice(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, qty INTEGER)`,
		`SELECT id, qty FROM orders`,
		`{"id":1,"id":2,"qty":1}`,
		`{"id":3,"qty":2,"QTY":4}`,
		`{"id":5,"qty":6,"x":1,"x":2}`,
	)
	if want := []string{"5|6"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters: %v", rows, want, dlq)
	}
	if len(dlq) != 2 || !strings.HasPrefix(dlq[0], "0|") || !strings.HasPrefix(dlq[1], "1|") || !strings.Contains(dlq[0], "given twice") {
		t.Errorf("dead letters = %v, want offsets 0 and 1, the field given twice", dlq)
	}
}
