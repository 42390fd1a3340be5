package merge

import (
	"fmt"
	"testing"
)

// A PostgreSQL row ExtractNewRecordState flattened without a position
// (add.fields=op,db,table), after the connector's positioned changes of
// its key, that left a TOAST value unchanged (Debezium's placeholder)
// keeps the value the key's latest earlier change gave, merged with it
// or before it, and a model built again holds the same row.
func TestChangelogModelFlattenedToastUpdateKeepsTheEarlierValue(t *testing.T) {
	for _, split := range []bool{false, true} {
		l := newChangeLoader(t)
		e := pgToast{l: l}
		e.event("c", 100, 1, "a", `"long1"`)
		e.event("u", 110, 1, "b", `"long2"`)
		if split {
			l.flush()
			l.mustMerge()
		}
		flat := func(id int, v, doc string) {
			l.rawKey(0, "pg.public.docs", fmt.Sprintf(`{"id":%d}`, id),
				fmt.Sprintf(`{"id":%d,"v":%q,"doc":%s,"__op":"u","__db":"shop","__table":"docs"}`, id, v, doc))
		}
		flat(1, "c", toastPlaceholder)
		flat(1, "d", toastPlaceholder)
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, v, doc FROM cdc_shop_docs ORDER BY id`, "1|d|long2")
		l.rebuilt(`SELECT id, v, doc FROM cdc_shop_docs ORDER BY id`, "cdc_shop_docs")
	}
}
