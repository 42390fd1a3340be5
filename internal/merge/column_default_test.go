package merge

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A column the source adds with a default (MySQL's and PostgreSQL's
// ALTER TABLE … ADD COLUMN … DEFAULT, which write no row change: every
// existing row takes the default at once) holds the default in the
// model's rows that did not change since, as it does at the source;
// Debezium's schema gives the default ("default" in the field's schema).
// A row changed since holds its own value, a null too (also in a column
// that had no default when the changelog table got it: v's, set later). The changes from
// before the column hold the default whether they load before it, in
// the same load or later from a partition behind, after a restart.
func TestChangelogModelColumnAddedWithADefault(t *testing.T) {
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
	fs := []fld{{"id", "int32", "", ""}, {"v", "string", "", ""}}
	before := func(p int32, id, pos int, v string) {
		k, e := dbzEvent("orders", "c", "mysql-bin.000001", pos, fs, "null", `{"id":`+strconv.Itoa(id)+`,"v":"`+v+`"}`, fs[:1], `{"id":`+strconv.Itoa(id)+`}`)
		l.rawKey(p, "s.db.orders", k, e)
	}
	before(0, 1, 100, "a")
	before(0, 2, 200, "b")
	l.flush()
	l.mustMerge()
	// ALTER TABLE orders ADD COLUMN status VARCHAR(8) NOT NULL DEFAULT
	// 'new', ADD COLUMN tier INT DEFAULT 7 at 300; then row 3 is
	// inserted, rows 2 and 3 updated (3's tier to NULL). Row 4's insert,
	// from before, is in the same load, and row 6's, on a partition
	// behind, loads after.
	// price DECIMAL(10,2) DEFAULT 1.50 too: a Decimal's default is its
	// base64 bytes, as its values are (150: AJY=).
	grown := append(fs, fld{"status", "string", "", ""}, fld{"tier", "int32", "", ""},
		fld{"price", "bytes", "org.apache.kafka.connect.data.Decimal", `{"scale":"2","connect.decimal.precision":"10"}`})
	withDefault := func(v string) string {
		v = strings.ReplaceAll(v, `{"field":"status","type":"string","optional":true`, `{"field":"status","type":"string","optional":false,"default":"new"`)
		v = strings.ReplaceAll(v, `{"field":"v","type":"string","optional":true`, `{"field":"v","type":"string","optional":true,"default":"-"`)
		v = strings.ReplaceAll(v, `{"field":"price","type":"bytes","optional":true`, `{"field":"price","type":"bytes","optional":true,"default":"AJY="`)
		return strings.ReplaceAll(v, `{"field":"tier","type":"int32","optional":true`, `{"field":"tier","type":"int32","optional":true,"default":7`)
	}
	after := func(op string, pos int, old, row string, id int) {
		k, v := dbzEvent("orders", op, "mysql-bin.000001", pos, grown, old, row, fs[:1], `{"id":`+strconv.Itoa(id)+`}`)
		l.rawKey(0, "s.db.orders", k, withDefault(v))
	}
	before(0, 4, 250, "d")
	after("c", 400, "null", `{"id":3,"v":"c","status":"new","tier":7,"price":"AJY="}`, 3)
	after("u", 500, `{"id":2,"v":"b","status":"new","tier":7,"price":"AJY="}`, `{"id":2,"v":"b","status":"paid","tier":7,"price":"AJY="}`, 2)
	after("c", 450, "null", `{"id":5,"v":null,"status":"x","tier":1,"price":null}`, 5)
	after("u", 600, `{"id":3,"v":"c","status":"new","tier":7,"price":"AJY="}`, `{"id":3,"v":"c","status":"new","tier":null,"price":"AJY="}`, 3)
	l.flush()
	l.mustMerge()
	// After a restart, which knows the default from the changelog table.
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
	before(1, 6, 260, "f")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(v, 'NULL'), status, coalesce(tier::VARCHAR, 'NULL'), coalesce(price::VARCHAR, 'NULL') FROM cdc_db_orders ORDER BY id`,
		"1|a|new|7|1.50", "2|b|paid|7|1.50", "3|c|new|NULL|1.50", "4|d|new|7|1.50", "5|NULL|x|1|NULL", "6|f|new|7|1.50")
}

// A changelog table made by a load whose changes are from before and
// after the source added a column with a default gets the column with
// its default: the changes from before read it.
func TestChangelogTableMadeWithAColumnDefault(t *testing.T) {
	l := newChangeLoader(t)
	fs := []fld{{"id", "int32", "", ""}, {"v", "string", "", ""}}
	k, v := dbzEvent("items", "c", "mysql-bin.000001", 100, fs, "null", `{"id":1,"v":"a"}`, fs[:1], `{"id":1}`)
	l.rawKey(0, "s.db.items", k, v)
	// qty BIGINT DEFAULT 1, and at TIMESTAMP NOT NULL DEFAULT
	// CURRENT_TIMESTAMP, whose default Debezium gives as the epoch: the
	// rows before take the ALTER's time at the source, which no change
	// says, so they are left NULL rather than given 1970.
	grown := append(fs, fld{"qty", "int64", "", ""}, fld{"at", "string", "io.debezium.time.ZonedTimestamp", ""})
	k, v = dbzEvent("items", "c", "mysql-bin.000001", 300, grown, "null", `{"id":2,"v":"b","qty":null,"at":"2024-05-01T10:00:00Z"}`, fs[:1], `{"id":2}`)
	v = strings.ReplaceAll(v, `{"field":"qty","type":"int64","optional":true`, `{"field":"qty","type":"int64","optional":true,"default":1`)
	v = strings.ReplaceAll(v, `{"field":"at","type":"string","optional":true`, `{"field":"at","type":"string","optional":false,"default":"1970-01-01T00:00:00Z"`)
	l.rawKey(0, "s.db.items", k, v)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v, coalesce(qty::VARCHAR, 'NULL'), coalesce("at"::VARCHAR, 'NULL') FROM cdc_db_items ORDER BY id`, "1|a|1|NULL", "2|b|NULL|2024-05-01 10:00:00")
}
