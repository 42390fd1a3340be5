package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// README, "Models": an `insert` inserts only if the key is absent (a
// replayed insert never overwrites). Two inserts of one key merged one at
// a time keep the first; landed in one increment they must too — the
// result may not depend on when the merge ran.
func TestHuntTwoInsertsOfAKeyInOneIncrementKeepTheFirst(t *testing.T) {
	ctx := context.Background()
	// One at a time.
	l1, m1, mg1 := customersLoader(t, false)
	l1.add(0, change{id: 1, action: "insert", name: "first", balance: "1"}.json())
	l1.flush()
	if _, err := mg1.Merge(ctx, m1); err != nil {
		t.Fatal(err)
	}
	l1.add(0, change{id: 1, action: "insert", name: "second", balance: "2"}.json())
	l1.flush()
	if _, err := mg1.Merge(ctx, m1); err != nil {
		t.Fatal(err)
	}
	oneAtATime := dump(t, l1.db(), `SELECT id, name FROM customers`)
	// Both in one increment.
	l2, m2, mg2 := customersLoader(t, false)
	l2.add(0, change{id: 1, action: "insert", name: "first", balance: "1"}.json())
	l2.add(0, change{id: 1, action: "insert", name: "second", balance: "2"}.json())
	l2.flush()
	if _, err := mg2.Merge(ctx, m2); err != nil {
		t.Fatal(err)
	}
	together := dump(t, l2.db(), `SELECT id, name FROM customers`)
	want := []string{"1|first"}
	if !slices.Equal(oneAtATime, want) || !slices.Equal(together, want) {
		t.Errorf("merged one at a time: %v; in one increment: %v; want %v both ways (a later insert never overwrites)", oneAtATime, together, want)
	}
}

// README: "a delete and a re-insert between two merges give the re-inserted
// row, as merged one at a time". delete, insert "second", insert "third"
// merged one at a time give "second" (the third insert finds the key); in
// one increment the merge sees a delete anywhere in the key's changes and
// lets the last insert overwrite.
func TestHuntDeleteInsertInsertInOneIncrement(t *testing.T) {
	ctx := context.Background()
	l, m, mg := customersLoader(t, false)
	l.add(0, change{id: 1, action: "insert", name: "first", balance: "1"}.json())
	l.flush()
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	l.add(0, change{id: 1, action: "delete", balance: "0"}.json())
	l.add(0, change{id: 1, action: "insert", name: "second", balance: "2"}.json())
	l.add(0, change{id: 1, action: "insert", name: "third", balance: "3"}.json()) // a replayed/duplicate insert: never overwrites
	l.flush()
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|second"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (as merged one change at a time)", got, want)
	}
}

// README: rejects hold each row that does not fit, (topic, partition,
// offset, reason); "a second run changes nothing". A `dlq replay` lowers
// the watermark and the rows after it are merged again — the rows already
// rejected are written to <name>_rejects a second time.
func TestHuntReplayLoweringTheWatermarkDoublesRejects(t *testing.T) {
	ctx := context.Background()
	l, m, mg := customersLoader(t, true)
	l.add(0, change{id: 1, v: 1, action: "insert", name: "one", balance: "1"}.json())
	l.next[0]++                                                           // offset 1 was dead-lettered
	l.add(0, []byte(`{"action":"update","id":3,"v":2,"balance":"lots"}`)) // offset 2: rejected by the model
	l.flush()
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db().Exec(`INSERT INTO trace_raw_dlq VALUES (?, 0, 1, NULL, ?::BLOB, 'an old reason', 'decode', now())`,
		testTopic, string(change{id: 2, v: 1, action: "insert", name: "two", balance: "2"}.json())); err != nil {
		t.Fatal(err)
	}
	if res, err := l.s.Replay(ctx, duckdb.ReplayOptions{Replayed: LowerWatermarks([]config.Model{m})}); err != nil || res.Loaded != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|one", "2|two"}; !slices.Equal(got, want) {
		t.Errorf("target: got %v, want %v", got, want)
	}
	if got, want := dump(t, l.db(), `SELECT "partition", "offset" FROM customers_rejects`), []string{"0|2"}; !slices.Equal(got, want) {
		t.Errorf("rejects: got %v, want %v (offset 2 rejected once)", got, want)
	}
}

// README, "Models": rows that do not fit — "a value that does not cast" —
// go to <name>_rejects. A list column whose element does not cast is
// TRY_CAST to a list holding NULL, not to NULL, so the row is merged with
// the element silently replaced by NULL instead of rejected.
func TestHuntModelListElementThatDoesNotCastIsRejected(t *testing.T) {
	ctx := context.Background()
	l := newRawLoader(t)
	l.add(0, []byte(`{"id":1,"qty":[1,"x"],"dims":{"w":"wide"}}`))
	l.add(0, []byte(`{"id":2,"qty":[1,2],"dims":{"w":3}}`))
	l.flush()
	m := config.Model{Name: "items", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"},
		{Name: "qty", Path: "$.qty", Type: "INTEGER[]"},
		{Name: "dims", Path: "$.dims", Type: "STRUCT(w INTEGER)"},
	}}.WithDefaults("trace_raw")
	if _, err := NewMerger(l.db(), slog.New(slog.DiscardHandler)).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	got := dump(t, l.db(), `SELECT id, qty::VARCHAR, dims::VARCHAR FROM items`)
	rejects := dump(t, l.db(), `SELECT "offset", reason FROM items_rejects`)
	if want := []string{"2|[1, 2]|{'w': 3}"}; !slices.Equal(got, want) || len(rejects) != 1 {
		t.Errorf("items = %v, rejects = %v; want %v and offset 0 rejected", got, rejects, want)
	}
}

// README: `dlq replay` "lowers each model's watermark to the lowest offset
// replayed in its partitions". A model whose source names the raw table in
// another case (DuckDB names are case-insensitive; the config accepts it,
// and the model merges it) or schema-qualified is left out: the replay's
// offsets are keyed by sink.table's spelling and looked up by m.Source, so
// the replayed row is never merged (nothing pending either).
func TestHuntReplayLowersAModelWhoseSourceIsSpelledOtherwise(t *testing.T) {
	for _, source := range []string{"TRACE_RAW", "main.trace_raw"} {
		t.Run(source, func(t *testing.T) {
			ctx := context.Background()
			l := newRawLoader(t)
			m := customers()
			m.Source = source
			mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
			l.add(0, change{id: 1, v: 1, action: "insert", name: "one", balance: "1"}.json())
			l.next[0]++ // offset 1 was dead-lettered
			l.add(0, change{id: 3, v: 1, action: "insert", name: "three", balance: "3"}.json())
			l.flush()
			if _, err := mg.Merge(ctx, m); err != nil {
				t.Fatal(err)
			}
			if _, err := l.db().Exec(`INSERT INTO trace_raw_dlq VALUES (?, 0, 1, NULL, ?::BLOB, 'an old reason', 'decode', now())`,
				testTopic, string(change{id: 2, v: 1, action: "insert", name: "two", balance: "2"}.json())); err != nil {
				t.Fatal(err)
			}
			if res, err := l.s.Replay(ctx, duckdb.ReplayOptions{Replayed: LowerWatermarks([]config.Model{m})}); err != nil || res.Loaded != 1 {
				t.Fatalf("replay: %+v %v", res, err)
			}
			if _, err := mg.Merge(ctx, m); err != nil {
				t.Fatal(err)
			}
			if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|one", "2|two", "3|three"}; !slices.Equal(got, want) {
				t.Errorf("got %v, want %v (the replayed row never reaches the model)", got, want)
			}
		})
	}
}
