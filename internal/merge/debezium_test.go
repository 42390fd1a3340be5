package merge

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

func orders() config.Model {
	return config.Model{
		Name: "orders", Format: config.FormatDebezium, Key: []string{"order_id"},
		Columns: config.Columns{
			{Name: "order_id", Path: "$.order_id", Type: "BIGINT"},
			{Name: "status", Path: "$.status", Type: "VARCHAR"},
			{Name: "total", Path: "$.total", Type: "DECIMAL(12,2)"},
		},
	}.WithDefaults("trace_raw")
}

// debezium renders a change event, with the schema wrapper or without.
func debezium(op string, before, after string, wrapped bool) []byte {
	if before == "" {
		before = "null"
	}
	if after == "" {
		after = "null"
	}
	ev := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"connector":"postgresql","lsn":1},"op":%q,"ts_ms":1}`, before, after, op)
	if wrapped {
		ev = `{"schema":{"type":"struct","optional":false},"payload":` + ev + `}`
	}
	return []byte(ev)
}

// Debezium events, with and without the schema wrapper: snapshot reads,
// creates, updates and deletes apply in offset order; tombstones are
// ignored; an event without op is rejected.
func TestDebezium(t *testing.T) {
	ctx := context.Background()
	l := newRawLoader(t)
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	row := func(id int, status string, total string) string {
		return fmt.Sprintf(`{"order_id":%d,"status":%q,"total":%s}`, id, status, total)
	}
	l.add(0, debezium("r", "", row(1, "new", "10.50"), true))
	l.add(0, debezium("r", "", row(2, "new", "20.00"), false))
	l.add(0, debezium("c", "", row(3, "new", "30.00"), true))
	l.flush()
	if _, err := mg.Merge(ctx, orders()); err != nil {
		t.Fatal(err)
	}
	l.add(0, debezium("u", row(1, "new", "10.50"), row(1, "paid", "10.50"), true))
	l.add(0, debezium("d", row(2, "new", "20.00"), "", false))
	l.add(0, nil) // the tombstone Debezium sends after a delete
	l.add(1, debezium("c", "", row(4, "new", "40.00"), false))
	l.add(1, debezium("u", row(4, "new", "40.00"), row(4, "shipped", "41.00"), false))
	l.add(1, []byte(`{"payload":{"after":{"order_id":5}}}`)) // no op
	l.flush()
	res, err := mg.Merge(ctx, orders())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1|paid|10.50", "3|new|30.00", "4|shipped|41.00"}
	if got := dump(t, l.db(), `SELECT order_id, status, total::VARCHAR FROM orders`); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if res.Rejected != 1 {
		t.Errorf("rejected %d, want 1", res.Rejected)
	}
	if got := dump(t, l.db(), `SELECT "partition", "offset", reason FROM orders_rejects`); len(got) != 1 ||
		!strings.HasPrefix(got[0], "1|2|not a Debezium change event: op is missing") {
		t.Errorf("rejects: %v", got)
	}
}
