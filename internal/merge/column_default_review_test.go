package merge

import (
	"strconv"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"strings"
	"testing"
)

// defaultEvents queues Debezium MySQL changes of db.t (id, then tier INT
// once added), tier's schema with def as its default ("" for none).
type defaultEvents struct {
	l  *changeLoader
	fs []fld
}

func (d defaultEvents) row(p int32, op string, pos, id int, tier, def string) {
	fs := d.fs[:1]
	after := `{"id":` + strconv.Itoa(id) + `}`
	if tier != "" {
		fs = d.fs
		after = `{"id":` + strconv.Itoa(id) + `,"tier":` + tier + `}`
	}
	k, v := dbzEvent("t", op, "mysql-bin.000001", pos, fs, "null", after, d.fs[:1], `{"id":`+strconv.Itoa(id)+`}`)
	if def != "" {
		v = strings.ReplaceAll(v, `{"field":"tier","type":"int32","optional":true`, `{"field":"tier","type":"int32","optional":true,"default":`+def)
	}
	d.l.rawKey(p, "s.db.t", k, v)
}

// A null written after the source dropped the column's default (ALTER
// TABLE … ALTER COLUMN … DROP DEFAULT; the schema no longer gives one) is
// a null at the source: it must not read as the default the changelog
// table got when the column was added.
func TestChangelogColumnDefaultDroppedNullStaysNull(t *testing.T) {
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
	d := defaultEvents{l, []fld{{"id", "int32", "", ""}, {"tier", "int32", "", ""}}}
	d.row(0, "c", 100, 1, "", "")
	l.flush()
	// ALTER TABLE t ADD COLUMN tier INT DEFAULT 7 at 200.
	d.row(0, "c", 300, 2, "7", "7")
	l.flush()
	// ALTER TABLE t ALTER COLUMN tier DROP DEFAULT at 400, then an
	// insert leaving tier out (NULL) and an update setting it NULL.
	d.row(0, "c", 500, 3, "null", "")
	d.row(0, "u", 600, 2, "null", "")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "1|7", "2|NULL", "3|NULL")
	// After a restart, which has seen no change with the default: the
	// changelog table's says tier had one.
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
	d = defaultEvents{l, d.fs}
	d.row(0, "c", 700, 4, "null", "")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "1|7", "2|NULL", "3|NULL", "4|NULL")
	l.rebuilt(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "cdc_db_t")
}

// rebuilt checks that model, dropped and built again from its changelog
// table, holds what q read of it before.
func (l *changeLoader) rebuilt(q, model string) {
	l.t.Helper()
	before := dump(l.t, l.s.DB(), q)
	if _, err := l.s.DB().Exec(`DROP TABLE ` + model); err != nil {
		l.t.Fatal(err)
	}
	l.mustMerge()
	l.want(q, before...)
}

// The rows from before the column hold the default of the time of the
// ADD COLUMN, not a default the source set later (ALTER COLUMN … SET
// DEFAULT), whose changes come in the same load.
func TestChangelogColumnDefaultSetLaterInTheSameLoad(t *testing.T) {
	l := newChangeLoader(t)
	d := defaultEvents{l, []fld{{"id", "int32", "", ""}, {"tier", "int32", "", ""}}}
	d.row(0, "c", 100, 1, "", "")
	l.flush()
	l.mustMerge()
	// ADD COLUMN tier INT DEFAULT 7 at 200; SET DEFAULT 8 at 400.
	d.row(0, "c", 300, 2, "7", "7")
	d.row(0, "c", 500, 3, "8", "8")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "1|7", "2|7", "3|8")
	// A later load, of a partition behind, brings row 4's insert from
	// before the column: it reads the default the load before gave the
	// changelog table (the sink's cache of it, in this process).
	d.row(1, "c", 150, 4, "", "")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "1|7", "2|7", "3|8", "4|7")
	l.rebuilt(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "cdc_db_t")
}

// A null of a column with a default in a change without its schema
// (Kafka Connect's JsonConverter with schemas.enable=false, as a
// connector may be configured after it ran with schemas) is the source's
// NULL: the row writes it, and it does not read the default.
func TestChangelogColumnDefaultNullWithoutSchema(t *testing.T) {
	l := newChangeLoader(t)
	d := defaultEvents{l, []fld{{"id", "int32", "", ""}, {"tier", "int32", "", ""}}}
	d.row(0, "c", 100, 1, "", "")
	l.flush()
	// ADD COLUMN tier INT DEFAULT 7 at 200.
	d.row(0, "c", 300, 2, "7", "7")
	l.flush()
	// Schemas off from here: row 3 inserted with tier NULL, row 2's set NULL.
	for _, c := range []struct{ op, id, before, after string }{
		{"c", "3", "null", `{"id":3,"tier":null}`},
		{"u", "2", `{"id":2,"tier":7}`, `{"id":2,"tier":null}`},
	} {
		l.rawKey(0, "s.db.t", `{"id":`+c.id+`}`, `{"before":`+c.before+`,"after":`+c.after+
			`,"source":{"connector":"mysql","name":"s","db":"db","table":"t","file":"mysql-bin.000001","pos":500,"row":0,"ts_ms":1700000000000,"snapshot":"false"},"op":"`+c.op+`","ts_ms":1700000000001}`)
	}
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(tier::VARCHAR, 'NULL') FROM cdc_db_t ORDER BY id`, "1|7", "2|NULL", "3|NULL")
}
