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
	got, rejects := mergeItems(t,
		`{"id":1,"qty":[1,"x"],"dims":{"w":"wide"}}`,
		`{"id":2,"qty":[1,2],"dims":{"w":3}}`)
	if want := []string{"2|[1, 2]|{'w': 3}"}; !slices.Equal(got, want) || len(rejects) != 1 {
		t.Errorf("items = %v, rejects = %v; want %v and offset 0 rejected", got, rejects, want)
	}
}

// A list or struct element with a fraction into an integer element is a
// value that does not fit, as a top-level integer column given 1.5 is
// (sqltext.FractionLost): DuckDB's cast of the JSON number 1.5 to an
// INTEGER element is 2, and the model held [2], a value never sent.
func TestModelRejectsAFractionIntoAnIntegerElement(t *testing.T) {
	got, rejects := mergeItems(t,
		`{"id":1,"qty":[1.5],"dims":{"w":3}}`,
		`{"id":2,"qty":[1,2],"dims":{"w":2.5}}`,
		`{"id":3,"qty":[1,2.0],"dims":{"w":3}}`)
	if want := []string{"3|[1, 2]|{'w': 3}"}; !slices.Equal(got, want) || len(rejects) != 2 {
		t.Errorf("items = %v, rejects = %v; want %v and offsets 0 and 1 rejected", got, rejects, want)
	}
}

// mergeItems merges values (partition 0, offsets 0…) into a model with a
// list and a struct of integers, and returns its rows and its rejects.
func mergeItems(t *testing.T, values ...string) (rows, rejects []string) {
	t.Helper()
	l := newRawLoader(t)
	for _, v := range values {
		l.add(0, []byte(v))
	}
	l.flush()
	m := config.Model{Name: "items", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"},
		{Name: "qty", Path: "$.qty", Type: "INTEGER[]"},
		{Name: "dims", Path: "$.dims", Type: "STRUCT(w INTEGER)"},
	}}.WithDefaults("trace_raw")
	if _, err := NewMerger(l.db(), slog.New(slog.DiscardHandler)).Merge(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return dump(t, l.db(), `SELECT id, qty::VARCHAR, dims::VARCHAR FROM items`), dump(t, l.db(), `SELECT "offset", reason FROM items_rejects`)
}
