package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A model given a version after its target was built merged on, on
// Databend too, with tombstones made empty by the setup: a change older
// than a key's delete merged before, arriving late, brought the deleted
// row back. A model whose key changed failed its merges on the
// tombstones' columns. The merger's setup now stops both and says to
// drop the target (what rebuilds it on Databend), as on DuckDB.
func TestModelGivenAVersionOrAnotherKeyOnDatabendAsksForARebuild(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "c", Target: "c", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"id"},
		Action:  config.Action{Path: "$.op", Delete: []string{"delete"}, Insert: []string{"insert"}},
		Columns: config.Columns{{Name: "id", Path: "$.id", Type: "BIGINT"}, {Name: "name", Path: "$.name", Type: "VARCHAR"}, {Name: "v", Path: "$.v", Type: "BIGINT"}}}
	n := 0
	add := func(docs ...string) {
		for _, doc := range docs {
			srv.AppendRow("trace_raw", databendtest.Row{"uuid": json.RawMessage(fmt.Sprintf(`"u%d"`, n)), "koffset": json.RawMessage(fmt.Sprint(n)),
				"kpartition": json.RawMessage("0"), "raw_data": json.RawMessage(doc), "record_metadata": json.RawMessage(`{"topic": "t"}`)})
			n++
		}
	}
	add(`{"op":"update","id":1,"v":5,"name":"one"}`, `{"op":"delete","id":1,"v":6}`, `{"op":"update","id":2,"v":1,"name":"two"}`)
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, r := range srv.Rows("c") {
			out = append(out, string(r["name"]))
		}
		slices.Sort(out)
		return out
	}
	versioned := m
	versioned.Version = "v"
	add(`{"op":"update","id":1,"v":4,"name":"one, late"}`)
	want := []string{`"two"`}
	_, err := merge.NewDatabendMerger(s, false).Merge(ctx, versioned) // the next tracelake merge
	if err == nil || !strings.Contains(err.Error(), "drop the target c") {
		t.Errorf("merge after the model got a version: %v, want an error saying to drop the target c", err)
	}
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("target after the model got a version: %q, want %q (key 1 deleted at version 6)", got, want)
	}
	srv.DropTable("c")
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, versioned); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, want) {
		t.Errorf("target built again: %q, want %q", got, want)
	}

	rekeyed := versioned
	rekeyed.Key = []string{"id", "name"}
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, rekeyed); err == nil || !strings.Contains(err.Error(), "drop the target c") {
		t.Errorf("merge after the model's key changed: %v, want an error saying to drop the target c", err)
	}
}
