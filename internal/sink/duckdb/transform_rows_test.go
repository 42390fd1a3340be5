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
	ctx := context.Background()
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
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: int64(len(values) - 1), Records: int64(len(values))}}}
	for i, v := range values {
		b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "t", Offset: int64(i), Value: []byte(v)}, envelope.ValueText)
	}
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	scan := func(q string) []string {
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
	return scan(query), scan(`SELECT "offset", error FROM orders_dlq`)
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
