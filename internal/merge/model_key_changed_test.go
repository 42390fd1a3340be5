package merge

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A model given a version after its target was built merged on without a
// tombstone for the deletes merged before: a change older than a key's
// delete, arriving late, brought the deleted row back, where a rebuild
// (which reads the delete with its version) keeps it gone. A model whose
// key or version column changed failed every merge on a Binder error
// about its tombstones, without saying what to do. Both now stop the
// merge and name `tracelake merge --rebuild`, as changed columns do.
func TestModelGivenAVersionOrAnotherKeyAsksForARebuild(t *testing.T) {
	ctx := context.Background()
	l, m, mg := customersLoader(t, false)
	l.add(0, change{id: 1, v: 5, action: "update", name: "one", balance: "1"}.json())
	l.add(0, change{id: 1, v: 6, action: "delete", name: "one", balance: "1"}.json())
	l.add(0, change{id: 2, v: 1, action: "update", name: "two", balance: "2"}.json())
	l.flush()
	mustMerge(t, mg, m)
	versioned := customers()
	l.add(0, change{id: 1, v: 4, action: "update", name: "one, late", balance: "1"}.json())
	l.flush()
	want := []string{"2|two"}
	_, err := mg.Merge(ctx, versioned)
	if err == nil || !strings.Contains(err.Error(), "tracelake merge --rebuild customers") {
		t.Errorf("merge after the model got a version: %v, want an error naming tracelake merge --rebuild customers", err)
	}
	if got := dump(t, l.db(), `SELECT id, name FROM customers`); !slices.Equal(got, want) {
		t.Errorf("target after the model got a version: %q, want %q (key 1 deleted at version 6)", got, want)
	}
	if _, err := mg.Rebuild(ctx, versioned, 0); err != nil {
		t.Fatal(err)
	}
	mustMerge(t, mg, versioned)
	if got := dump(t, l.db(), `SELECT id, name FROM customers`); !slices.Equal(got, want) {
		t.Errorf("target rebuilt: %q, want %q", got, want)
	}

	rekeyed := customers()
	rekeyed.Key = []string{"id", "name"}
	if _, err := mg.Merge(ctx, rekeyed); err == nil || !strings.Contains(err.Error(), "tracelake merge --rebuild customers") {
		t.Errorf("merge after the model's key changed: %v, want an error naming tracelake merge --rebuild customers", err)
	}
	if _, err := mg.Rebuild(ctx, rekeyed, 0); err != nil {
		t.Fatal(err)
	}
	mustMerge(t, mg, rekeyed)
}
