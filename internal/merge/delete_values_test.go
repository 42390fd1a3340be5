package merge

import (
	"slices"
	"testing"
)

// A delete removes its key's row whatever its other columns hold: only
// its key (and version) say what it deletes. A delete whose before image
// held a value its column could not cast (or, in an integer column, would
// round), as the update before it did, was rejected, and the row it deleted stayed in the model
// for good, with the value of a change older than the delete.
func TestModelDeleteIgnoresItsOtherValues(t *testing.T) {
	for _, versioned := range []bool{false, true} {
		l, m, mg := customersLoader(t, versioned)
		l.add(0, []byte(`{"action":"insert","id":1,"v":1,"name":"a","balance":1.00}`))
		l.add(0, []byte(`{"action":"insert","id":2,"v":1,"name":"b","balance":2.00}`))
		l.flush()
		mustMerge(t, mg, m)
		l.add(0, []byte(`{"action":"update","id":1,"v":2,"name":"a","balance":"1.2x"}`))
		l.add(0, []byte(`{"action":"delete","id":1,"v":3,"name":"a","balance":"1.2x"}`))
		l.add(0, []byte(`{"action":"delete","id":2,"v":2,"name":"b","balance":"two"}`))
		l.flush()
		mustMerge(t, mg, m)
		if got := dump(t, l.db(), `SELECT id, balance FROM customers`); len(got) != 0 {
			t.Errorf("versioned %v: rows %v after every key was deleted, want none", versioned, got)
		}
		want := []string{"column balance: cannot cast 1.2x to DECIMAL(18,2)"}
		if got := dump(t, l.db(), `SELECT reason FROM customers_rejects`); !slices.Equal(got, want) {
			t.Errorf("versioned %v: rejects %q, want %q (the update's alone)", versioned, got, want)
		}
	}
}
