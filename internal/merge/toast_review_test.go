package merge

import (
	"fmt"
	"testing"
)

// pgRaw queues a Debezium PostgreSQL change of shop.public.docs without
// the schema wrapper: op, LSN and the row image's members after id (JSON
// text); op "t" is a truncation.
func pgRaw(l *changeLoader, p int32, op string, lsn, id int, members string) {
	l.t.Helper()
	row := fmt.Sprintf(`{"id":%d,%s}`, id, members)
	before, after, key := "null", row, fmt.Sprintf(`{"id":%d}`, id)
	switch op {
	case "d":
		before, after = row, "null"
	case "t":
		after = "null"
	}
	payload := fmt.Sprintf(`{"before":%s,"after":%s,"op":%q,"ts_ms":1700000000001,`+
		`"source":{"connector":"postgresql","name":"pg","db":"shop","schema":"public","table":"docs","lsn":%d,"sequence":"[\"%d\",\"%d\"]","ts_ms":1700000000000}}`,
		before, after, op, lsn, lsn, lsn)
	if op == "t" {
		l.raw(p, "pg.public.docs", payload)
		return
	}
	l.rawKey(p, "pg.public.docs", key, payload)
}

// Two columns left unread by one update take their values from different
// earlier changes of the key (a real NULL one sent is kept: it is a
// value, not one left unread), in the round and from the model's rows,
// beside a column the source added in the same round; a rebuild matches.
func TestToastedTwoColumnsFromDifferentChanges(t *testing.T) {
	l := newChangeLoader(t)
	u := toastPlaceholder
	q := `SELECT id, v, coalesce(a, 'NULL'), coalesce(b, 'NULL'), coalesce(c, 'NULL') FROM cdc_shop_docs ORDER BY id`
	pgRaw(l, 0, "c", 100, 1, `"v":"c","a":"a1","b":"b1"`)
	pgRaw(l, 0, "u", 110, 1, `"v":"u1","a":"a2","b":`+u)
	pgRaw(l, 0, "u", 120, 1, `"v":"u2","a":`+u+`,"b":null`)
	pgRaw(l, 0, "u", 130, 1, `"v":"u3","a":`+u+`,"b":`+u)
	pgRaw(l, 0, "c", 100, 2, `"v":"c","a":"a1","b":"b1"`)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v, coalesce(a, 'NULL'), coalesce(b, 'NULL') FROM cdc_shop_docs ORDER BY id`, "1|u3|a2|NULL", "2|c|a1|b1")
	pgRaw(l, 0, "u", 200, 2, `"v":"x","a":`+u+`,"b":"b2"`)
	pgRaw(l, 0, "u", 210, 2, `"v":"y","a":null,"b":`+u)
	pgRaw(l, 0, "u", 220, 2, `"v":"z","a":`+u+`,"b":`+u)
	pgRaw(l, 0, "u", 230, 1, `"v":"w","a":`+u+`,"b":`+u+`,"c":"new"`)
	l.flush()
	l.mustMerge()
	l.want(q, "1|w|a2|NULL|new", "2|z|NULL|b2|NULL")
	l.rebuilt(q, "cdc_shop_docs")
}

// A truncation in the round: an update after it takes the value of the
// key's create after it, never of a change before it or of the model's
// row it removed (NULL without such a create); a rebuild matches.
func TestToastedAfterTruncation(t *testing.T) {
	l := newChangeLoader(t)
	q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
	pgRaw(l, 0, "c", 100, 1, `"v":"c","doc":"A"`)
	pgRaw(l, 0, "c", 100, 2, `"v":"c","doc":"A2"`)
	l.flush()
	l.mustMerge()
	pgRaw(l, 0, "u", 140, 1, `"v":"u0","doc":"A3"`)
	pgRaw(l, 0, "t", 150, 0, "")
	pgRaw(l, 0, "c", 160, 1, `"v":"c2","doc":"B"`)
	pgRaw(l, 0, "u", 170, 1, `"v":"u","doc":`+toastPlaceholder)
	pgRaw(l, 0, "u", 170, 2, `"v":"u","doc":`+toastPlaceholder)
	l.flush()
	l.mustMerge()
	l.want(q, "1|u|B", "2|u|NULL")
	l.rebuilt(q, "cdc_shop_docs")
}
