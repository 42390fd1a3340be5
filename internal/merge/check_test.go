package merge

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
)

// differences counts the rows of a that b lacks and of b that a lacks.
func differences(t *testing.T, tx *sql.Tx, a, b string) (n int64) {
	t.Helper()
	q := fmt.Sprintf(`SELECT (SELECT count(*) FROM (SELECT * FROM %[1]s EXCEPT ALL SELECT * FROM %[2]s)) +
		(SELECT count(*) FROM (SELECT * FROM %[2]s EXCEPT ALL SELECT * FROM %[1]s))`, a, b)
	if err := tx.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// reconcile --model goes through a running `tracelake run`, whose loads
// land between its merges: Check rebuilt the model from the whole raw
// table, rows past the model's watermarks included, so a target merged
// correctly up to its watermarks was reported different whenever a load
// had landed since the last merge (always, under a steady load). The
// rebuild is of the rows the target has merged: a row the merge skipped
// (below a watermark, not in the target) is still a difference, a row
// not merged yet is not.
func TestCheckComparesWhatTheTargetHasMerged(t *testing.T) {
	l := newRawLoader(t)
	m := customers()
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	check := func(want int64) {
		t.Helper()
		if err := mg.Check(context.Background(), m, 2, func(tx *sql.Tx, rebuilt string) error {
			if n := differences(t, tx, m.Target, rebuilt); n != want {
				t.Errorf("target and rebuild differ in %d rows, want %d", n, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(2) {
		l.add(p, change{id: int(p), v: 1, action: "insert", name: "a", balance: "1"}.json())
		l.add(p, change{id: int(p) + 10, v: 1, action: "insert", name: "b", balance: "2"}.json())
	}
	l.flush()
	mustMerge(t, mg, m)
	check(0)

	// Loaded after the merge: an update, a delete and a new key.
	l.add(0, change{id: 0, v: 2, action: "update", name: "a2", balance: "3"}.json())
	l.add(1, change{id: 11, v: 2, action: "delete", balance: "0"}.json())
	l.add(1, change{id: 20, v: 1, action: "insert", name: "c", balance: "4"}.json())
	l.flush()
	check(0)

	// A row the target lost is found all the same.
	if _, err := l.db().Exec(`DELETE FROM customers WHERE id = 10`); err != nil {
		t.Fatal(err)
	}
	check(1)
	mustMerge(t, mg, m)
	check(1)
}
