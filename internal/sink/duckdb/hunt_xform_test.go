package duckdb

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// README, "Transform mode": an object the table rejects goes to the DLQ —
// "a primary-key or unique key already in the table or earlier in the same
// load". An earlier object of the load that is itself dead-lettered (a
// failing CHECK) is not in the table: the next object with its key must
// load, not be dead-lettered as a duplicate of a row that was never stored.
func TestHuntTransformKeyOfADeadLetteredRowIsNoDuplicate(t *testing.T) {
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
// was never stored, so object 2 must load.
func TestHuntTransformUniqueOfADeadLetteredRowIsNoDuplicate(t *testing.T) {
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
// 08:00 UTC. DuckDB's cast of the text drops the offset and stores 10:00 —
// a wrong instant, silently. It must be stored as 08:00 or dead-lettered.
func TestHuntTransformTimestampWithOffsetIsNotShifted(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, ts TIMESTAMP)`,
		`SELECT id, ts::VARCHAR FROM orders`,
		`{"id":1,"ts":"2024-01-01T10:00:00+02:00"}`,
	)
	if slices.Equal(rows, []string{"1|2024-01-01 10:00:00"}) {
		t.Errorf("orders = %v: the +02:00 offset was dropped (want 2024-01-01 08:00:00, or a dead letter); dead letters: %v", rows, dlq)
	}
}

// README, "Transform mode": "fields are matched to columns by name". A
// column added to the user's table while tracelake runs (only constraints
// are documented as read at start) is never filled: the sink keeps the
// columns it read in Prepare and inserts objects with the new field
// silently dropped — no error, no dead letter, no log.
func TestHuntTransformColumnAddedWhileRunningIsFilled(t *testing.T) {
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

// A user table with a generated column: Prepare accepts it, then every load
// fails (the generation expression is used as the default, outside the
// table: "Referenced column id not found"), retried forever — nothing of the
// topic loads. README, "Transform mode": each object is a row of the table;
// a generated column is not a field to fill.
func TestHuntTransformTableWithAGeneratedColumnLoads(t *testing.T) {
	rows, dlq := loadTransformed(t, `CREATE TABLE orders (id BIGINT, dbl BIGINT GENERATED ALWAYS AS (id * 2))`,
		`SELECT id, dbl FROM orders`,
		`{"id":2}`,
	)
	if want := []string{"2|4"}; !slices.Equal(rows, want) {
		t.Errorf("orders = %v, want %v; dead letters %v", rows, want, dlq)
	}
}
