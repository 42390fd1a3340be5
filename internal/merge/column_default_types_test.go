package merge

import (
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A change from before the source added columns with defaults, of each
// type Debezium gives one (times of each kind, a zoned one with an
// offset, floats, text with quotes, backslashes and newlines, JSON,
// bytes, decimals), reads in each column what a change holding the
// default as its value does: loaded before the columns (the UPDATE that
// fills the table's rows), in the same load (the move reads the
// default) and after a restart (the default as the catalog holds it).
// The defaults are constants of their type since 831a3145.
func TestChangelogColumnDefaultsOfEveryTypeReadAsTheirValues(t *testing.T) {
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
	fs := []fld{{"id", "int32", "", ""}}
	before := func(p int32, id string, pos int) {
		k, v := dbzEvent("items", "c", "mysql-bin.000001", pos, fs, "null", `{"id":`+id+`}`, fs, `{"id":`+id+`}`)
		l.rawKey(p, "s.db.items", k, v)
	}
	before(0, "1", 100)
	l.flush()
	l.mustMerge()
	added := []struct {
		f   fld
		def string
	}{
		{fld{"i32", "int32", "", ""}, "-2147483648"},
		{fld{"i64", "int64", "", ""}, "9223372036854775807"},
		{fld{"f64", "double", "", ""}, "0.1"},
		{fld{"tiny", "double", "", ""}, "1e-7"},
		{fld{"negz", "double", "", ""}, "-0.0"},
		{fld{"huge", "double", "", ""}, "1.7976931348623157e308"},
		{fld{"f32", "float", "", ""}, "0.1"},
		{fld{"b", "boolean", "", ""}, "false"},
		{fld{"s", "string", "", ""}, `"it's a \\ back\nslash, \"quoted\", é 😀"`},
		{fld{"empty", "string", "", ""}, `""`},
		{fld{"d", "int32", "io.debezium.time.Date", ""}, "-719162"},
		{fld{"ts", "int64", "io.debezium.time.Timestamp", ""}, "1700000000123"},
		{fld{"mts", "int64", "io.debezium.time.MicroTimestamp", ""}, "-62135596800000001"},
		{fld{"zts", "string", "io.debezium.time.ZonedTimestamp", ""}, `"2023-11-14T22:13:20.123456+05:30"`},
		{fld{"mt", "int64", "io.debezium.time.MicroTime", ""}, "86399999999"},
		{fld{"j", "string", "io.debezium.data.Json", ""}, `"{\"a\": [1, 2.50, \"x\"], \"b\": null}"`},
		{fld{"u", "string", "io.debezium.data.Uuid", ""}, `"0e5a1b6c-3c8e-4c1e-9f3a-2b7d1c9e8f00"`},
		{fld{"raw", "bytes", "", ""}, `"AAEC/w=="`},
		{fld{"dec", "bytes", "org.apache.kafka.connect.data.Decimal", `{"scale":"10","connect.decimal.precision":"38"}`}, `"S3Bbd2xAs2Ua5b8xFQ=="`},
		{fld{"vdec", "struct", "io.debezium.data.VariableScaleDecimal", ""}, `{"scale":3,"value":"AeJA"}`},
	}
	grown := append([]fld{}, fs...)
	row := `{"id":2`
	for _, a := range added {
		grown = append(grown, a.f)
		row += `,"` + a.f.name + `":` + a.def
	}
	row += "}"
	withDefaults := func(v string) string {
		for _, a := range added {
			at := `{"field":"` + a.f.name + `","type":"` + a.f.typ + `","optional":true`
			if !strings.Contains(v, at) {
				t.Fatalf("no %s in %s", at, v)
			}
			v = strings.ReplaceAll(v, at, at+`,"default":`+a.def)
		}
		return v
	}
	before(0, "3", 150)
	k, v := dbzEvent("items", "c", "mysql-bin.000001", 300, grown, "null", row, fs, `{"id":2}`)
	l.rawKey(0, "s.db.items", k, withDefaults(v))
	l.flush()
	l.mustMerge()
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
	before(1, "4", 160)
	l.flush()
	l.mustMerge()
	var cols, types []string
	for _, a := range added {
		cols = append(cols, a.f.name)
	}
	rows, err := l.s.DB().Query(`SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'cdc_db_items' AND column_name IN ('` + strings.Join(cols, `','`) + `') ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		types = append(types, n+" "+ty)
	}
	rows.Close()
	t.Logf("columns: %s", strings.Join(types, ", "))
	for _, c := range cols {
		var vals []string
		q := `SELECT coalesce(CAST("` + c + `" AS VARCHAR), 'NULL') FROM cdc_db_items ORDER BY id`
		r, err := l.s.DB().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			vals = append(vals, s)
		}
		r.Close()
		if len(vals) != 4 {
			t.Fatalf("%s: %d rows %q", c, len(vals), vals)
		}
		// ids 1, 3, 4 are from before; 2 holds the default.
		for i, at := range []string{"loaded before the column", "", "in the load of the column", "loaded after a restart"} {
			if at != "" && vals[i] != vals[1] {
				t.Errorf("column %s: a change from before, %s, reads %q; one holding the default %q", c, at, vals[i], vals[1])
			}
		}
		if vals[1] == "NULL" {
			t.Errorf("column %s: the change holding the default reads NULL", c)
		}
	}
}
