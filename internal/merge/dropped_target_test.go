package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// `tracelake merge` answers that an OpenTelemetry table's dedup model is
// rebuilt by dropping it. The merge created the target again but kept
// the model's watermarks, which describe the target dropped: it read only
// the rows loaded since the last merge, and every span merged before was
// gone from otel_spans_dedup for good (verify then found nothing pending).
func TestDedupTargetDroppedIsBuiltAgainFromEveryRow(t *testing.T) {
	l := newOTelLoader(t, otel.SignalTraces)
	g := tracegen.New(5)
	msg := func() []byte {
		v, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(g.OTLPTrace())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ctx := context.Background()
	mg := NewMerger(l.s.DB(), slog.New(slog.DiscardHandler))
	dd := Dedup{Table: &otel.Spans, Name: "otel_spans"}
	l.load(msg(), msg())
	if _, err := mg.Dedup(ctx, dd); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.DB().Exec(`DROP TABLE otel_spans_dedup`); err != nil {
		t.Fatal(err)
	}
	l.load(msg())
	if _, err := mg.Dedup(ctx, dd); err != nil {
		t.Fatal(err)
	}
	spans := l.count(`SELECT count(*) FROM otel_spans`)
	if kept := l.count(`SELECT count(*) FROM otel_spans_dedup`); kept != spans {
		t.Errorf("otel_spans_dedup built again keeps %d of %d spans", kept, spans)
	}
}

// The same for a model of merge.models whose target is dropped: the merge
// that creates it again starts from the first raw row, with its rejects
// and tombstones, which describe the target dropped, forgotten (a reject
// is held once, and a tombstone of the old target does not stand for a
// delete the new one has not merged).
func TestModelTargetDroppedIsBuiltAgainFromEveryRow(t *testing.T) {
	l := newRawLoader(t)
	m := customers()
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	l.add(0, change{id: 1, v: 1, action: "insert", name: "a", balance: "1"}.json())
	l.add(0, change{id: 2, v: 1, action: "insert", name: "b", balance: "2"}.json())
	l.add(0, change{id: 3, v: 2, action: "delete", balance: "0"}.json())
	l.add(0, []byte(`{"action":"update","id":4,"v":1,"balance":"lots"}`))
	l.flush()
	mustMerge(t, mg, m)
	want := dump(t, l.db(), `SELECT * FROM customers`)
	wantRejects := dump(t, l.db(), `SELECT topic, "partition", "offset", reason FROM customers_rejects`)
	if _, err := l.db().Exec(`DROP TABLE customers`); err != nil {
		t.Fatal(err)
	}
	l.add(0, change{id: 5, v: 1, action: "insert", name: "e", balance: "5"}.json())
	l.add(0, change{id: 3, v: 1, action: "insert", name: "c", balance: "3"}.json()) // older than its delete
	l.flush()
	mustMerge(t, mg, m)
	want = append(want, "5|e|5|1")
	slices.Sort(want)
	if got := dump(t, l.db(), `SELECT * FROM customers`); !slices.Equal(got, want) {
		t.Errorf("customers built again:\n got %v\nwant %v", got, want)
	}
	if got := dump(t, l.db(), `SELECT topic, "partition", "offset", reason FROM customers_rejects`); !slices.Equal(got, wantRejects) {
		t.Errorf("rejects after the target was built again:\n got %v\nwant %v", got, wantRejects)
	}
}

// The same for change capture's models, merged with nothing to
// configure: a model dropped (to build it again) is made by the next
// round from the first change of its changelog table, deletes applied —
// also when no change came since, and whatever the other models do.
func TestChangelogModelDroppedIsBuiltAgainFromEveryChange(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 110, row(2, "b"), "id")
	l.change(0, "orders", "c", 120, row(3, "c"), "id")
	l.change(0, "orders", "d", 130, row(3, "c"), "id")
	l.change(0, "items", "c", 100, row(7, "x"), "id")
	l.flush()
	l.mustMerge()
	if _, err := l.s.DB().Exec(`DROP TABLE cdc_db_orders`); err != nil {
		t.Fatal(err)
	}
	res := l.mustMerge()
	if _, ok := res["cdc_db_orders"]; !ok || len(res) != 1 {
		t.Errorf("the round after the drop merged %v, want the dropped model alone", res)
	}
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a", "2|b")
	l.change(0, "orders", "u", 140, row(1, "a2"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a2", "2|b")
	l.want(`SELECT id, v FROM cdc_db_items`, "7|x")
}
