package reconcile

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

func TestCompare(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE a AS SELECT i AS id, 'v' || i AS name, i * 1.5 AS amount FROM range(1000) t(i)`,
		`CREATE TABLE b AS SELECT * FROM a`,
		`CREATE TABLE c AS SELECT amount, name, id FROM a`, // same rows, other column order
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Compare(ctx, db, Spec{Left: "a", Right: "b", Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal || r.LeftRows != 1000 || r.LeftSum != r.RightSum || len(r.Examples) != 0 {
		t.Fatalf("identical tables reported different: %+v", r)
	}
	if r, err := Compare(ctx, db, Spec{Left: "a", Right: "c", Key: []string{"id"}}); err != nil || !r.Equal {
		t.Fatalf("same rows in another column order: %+v %v", r, err)
	}

	// A changed value, a missing row, an extra row, a duplicated key.
	for _, q := range []string{
		`UPDATE b SET name = 'changed' WHERE id = 7`,
		`DELETE FROM b WHERE id = 8`,
		`INSERT INTO b VALUES (5000, 'extra', 1)`,
		`INSERT INTO b SELECT * FROM a WHERE id = 9`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r, err = Compare(ctx, db, Spec{Left: "a", Right: "b", Key: []string{"id"}, Examples: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Equal || r.Differ != 1 || r.OnlyLeft != 1 || r.OnlyRight != 1 || r.DupRight != 2 || r.DupLeft != 0 {
		t.Fatalf("report: %+v", r)
	}
	var text strings.Builder
	r.WriteText(&text)
	for _, want := range []string{"DIFFERENT", "key 7: values differ", "key 8: missing in b", "key 5000: missing in a", "key 9: key present more than once"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	// Comparing only the columns that did not change: the value change is gone.
	r, err = Compare(ctx, db, Spec{Left: "a", Right: "b", Key: []string{"id"}, Columns: []string{"id", "amount"}})
	if err != nil || r.Differ != 0 || r.OnlyLeft != 1 {
		t.Fatalf("columns: %+v %v", r, err)
	}
}
