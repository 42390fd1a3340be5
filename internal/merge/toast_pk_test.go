package merge

import (
	"fmt"
	"testing"
)

// An UPDATE that changes a row's primary key and leaves a TOAST value
// unchanged: Debezium's PostgreSQL connector sends it as a delete of the
// old key and a create of the new one
// (RelationalChangeRecordEmitter.emitUpdateAsPrimaryKeyChangeRecord),
// both at the update's LSN, the create's row holding the placeholder for
// the value the update did not read (its new tuple did not carry it), the
// delete's before image the old key alone (REPLICA IDENTITY DEFAULT).
// The new key's row holds the create's columns and the old key's value
// of doc, whether the two changes merge together or the delete first
// (the keys on two partitions), and a model built again holds the same.
func TestToastedPrimaryKeyChange(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			e.partition = 1
			e.event("c", 100, 1, "a", `"big1"`)
			e.event("u", 110, 1, "b", toastPlaceholder)
			e.partition = 0
			e.event("c", 100, 4, "a", `"big4"`)
			l.flush()
			l.mustMerge()
			// UPDATE docs SET id = 2, v = 'c' WHERE id = 1 at LSN 200;
			// UPDATE docs SET id = 3 WHERE id = 4 at LSN 210.
			e.partition = 1
			e.event("d", 200, 1, "", `null`)
			e.partition = 0
			e.event("d", 210, 4, "", `null`)
			if split {
				l.flush()
				l.mustMerge()
				l.want(q)
			}
			e.partition = 0
			e.event("c", 200, 2, "c", toastPlaceholder)
			e.partition = 1
			e.event("c", 210, 3, "a", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "2|c|big1", "3|a|big4")
			l.rebuilt(q, "cdc_shop_docs")
			// Key 2 changed again to 5, then an update that did not read
			// doc, in one round or two: the value goes along the chain.
			e.partition = 0
			e.event("d", 300, 2, "", `null`)
			e.partition = 1
			e.event("c", 300, 5, "d", toastPlaceholder)
			if split {
				l.flush()
				l.mustMerge()
				l.want(q, "3|a|big4", "5|d|big1")
			}
			e.event("u", 310, 5, "e", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "3|a|big4", "5|e|big1")
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}
