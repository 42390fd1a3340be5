package merge

import (
	"fmt"
	"testing"
)

// Two rows' primary-key changes at one position (a decoder that gives
// every change of a transaction the transaction's LSN, as Debezium 1.x
// did with wal2json, one message per transaction): each create that did
// not read doc has two deletes of other keys at its position, and which
// is its old key the changelog does not say. Neither create may take
// the other row's value; doc is NULL (with the warning) until a change
// sends it, in one round or two, and in a model built again.
func TestToastedPrimaryKeyChangesSharingAPosition(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			e.partition = 1
			e.event("c", 100, 1, "a", `"big1"`)
			e.partition = 0
			e.event("c", 110, 2, "a", `"big2"`)
			l.flush()
			l.mustMerge()
			// UPDATE docs SET id = id + 10, v = 'b' at one position 200.
			e.partition = 1
			e.event("d", 200, 1, "", `null`)
			e.partition = 0
			e.event("d", 200, 2, "", `null`)
			if split {
				l.flush()
				l.mustMerge()
			}
			e.partition = 1
			e.event("c", 200, 11, "b", toastPlaceholder)
			e.partition = 0
			e.event("c", 200, 12, "b", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "11|b|NULL", "12|b|NULL")
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}
