package merge

import (
	"fmt"
	"testing"
)

// An update that did not read doc right after its key's delete (its
// create lost, or a connector writing the placeholder under REPLICA
// IDENTITY FULL, whose delete's before image holds doc) has no earlier
// value: doc is NULL, not the deleted row's value, whether the delete
// merged in the update's round or an earlier one, and a model built again
// holds the same.
func TestToastedAfterDeleteWithFullBeforeImage(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			e.event("c", 100, 1, "a", `"big"`)
			e.event("d", 200, 1, "a", `"big"`)
			if split {
				l.flush()
				l.mustMerge()
				l.want(q)
			}
			e.event("u", 300, 1, "b", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "1|b|NULL")
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}
