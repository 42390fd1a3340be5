package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// README: rejects hold each row that does not fit, (topic, partition,
// offset, reason); "a second run changes nothing". A `dlq replay` lowers
// the watermark and the rows after it are merged again: a row rejected
// before is held in <name>_rejects once, not once per merge.
func TestReplayLoweringTheWatermarkKeepsEachRejectOnce(t *testing.T) {
	l, m, mg := customersLoader(t, true)
	l.add(0, change{id: 1, v: 1, action: "insert", name: "one", balance: "1"}.json())
	l.next[0]++                                                           // offset 1 was dead-lettered
	l.add(0, []byte(`{"action":"update","id":3,"v":2,"balance":"lots"}`)) // offset 2: rejected by the model
	l.flush()
	mustMerge(t, mg, m)
	replayDeadLetter(t, l, m, change{id: 2, v: 1, action: "insert", name: "two", balance: "2"}.json())
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|one", "2|two"}; !slices.Equal(got, want) {
		t.Errorf("target: got %v, want %v", got, want)
	}
	if got, want := dump(t, l.db(), `SELECT "partition", "offset" FROM customers_rejects`), []string{"0|2"}; !slices.Equal(got, want) {
		t.Errorf("rejects: got %v, want %v (offset 2 rejected once)", got, want)
	}
}

// README: `dlq replay` "lowers each model's watermark to the lowest offset
// replayed in its partitions". A model whose source names the raw table in
// another case (DuckDB names are case-insensitive) or schema-qualified
// names the same table: its watermark is lowered too, and the replayed
// row is merged.
func TestReplayLowersAModelWhoseSourceIsSpelledOtherwise(t *testing.T) {
	for _, source := range []string{"TRACE_RAW", "main.trace_raw"} {
		t.Run(source, func(t *testing.T) {
			l := newRawLoader(t)
			m := customers()
			m.Source = source
			mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
			l.add(0, change{id: 1, v: 1, action: "insert", name: "one", balance: "1"}.json())
			l.next[0]++ // offset 1 was dead-lettered
			l.add(0, change{id: 3, v: 1, action: "insert", name: "three", balance: "3"}.json())
			l.flush()
			mustMerge(t, mg, m)
			replayDeadLetter(t, l, m, change{id: 2, v: 1, action: "insert", name: "two", balance: "2"}.json())
			mustMerge(t, mg, m)
			if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|one", "2|two", "3|three"}; !slices.Equal(got, want) {
				t.Errorf("got %v, want %v (the replayed row never reaches the model)", got, want)
			}
		})
	}
}

// replayDeadLetter puts value in the raw table's dead letters at partition
// 0, offset 1, and replays it as `dlq replay` does, lowering m's watermark.
func replayDeadLetter(t *testing.T, l *rawLoader, m config.Model, value []byte) {
	t.Helper()
	if _, err := l.db().Exec(`INSERT INTO trace_raw_dlq (topic, "partition", "offset", "key", "value", error, stage, add_time) VALUES (?, 0, 1, NULL, ?::BLOB, 'an old reason', 'decode', now())`, testTopic, string(value)); err != nil {
		t.Fatal(err)
	}
	if res, err := l.s.Replay(context.Background(), duckdb.ReplayOptions{Replayed: LowerWatermarks([]config.Model{m})}); err != nil || res.Loaded != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
}
