package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// README, "Models": rows that do not fit — "a value that does not cast" —
// go to <name>_rejects. A list or struct element that does not cast is
// such a value: TRY_CAST gives the list with NULL for the element, which
// must not be merged as if the element were null.
func TestModelRejectsAListOrStructElementThatDoesNotCast(t *testing.T) {
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

// A list or struct element with a fraction into an integer element is a
// value that does not fit, as a top-level integer column given 1.5 is
// (sqltext.FractionLost): DuckDB's cast of the JSON number 1.5 to an
// INTEGER element is 2, and the model held [2], a value never sent.
func TestModelRejectsAFractionIntoAnIntegerElement(t *testing.T) {
	ctx := context.Background()
	l := newRawLoader(t)
	l.add(0, []byte(`{"id":1,"qty":[1.5],"dims":{"w":3}}`))
	l.add(0, []byte(`{"id":2,"qty":[1,2],"dims":{"w":2.5}}`))
	l.add(0, []byte(`{"id":3,"qty":[1,2.0],"dims":{"w":3}}`))
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
	if want := []string{"3|[1, 2]|{'w': 3}"}; !slices.Equal(got, want) || len(rejects) != 2 {
		t.Errorf("items = %v, rejects = %v; want %v and offsets 0 and 1 rejected", got, rejects, want)
	}
}
