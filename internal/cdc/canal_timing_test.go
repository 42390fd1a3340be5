package cdc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// canalBenchColumns are the columns of the benchmarks' table, as
// mysqlType names them and sqlType numbers them (java.sql.Types), with
// a value of row i: a table of an order service, ~20 columns of the
// types a MySQL schema holds, an ENUM and a SET among them.
var canalBenchColumns = []struct {
	name, mysqlType string
	sqlType         int
	value           func(i int) any // a string, or nil for NULL
}{
	{"id", "bigint(20)", -5, func(i int) any { return fmt.Sprint(1000 + i) }},
	{"tenant_id", "int(11)", 4, func(i int) any { return "42" }},
	{"order_no", "varchar(64)", 12, func(i int) any { return fmt.Sprintf("SO-2026-%08d", i) }},
	{"status", "enum('pending','paid','shipped','delivered','cancelled','refunded')", 4, func(i int) any { return fmt.Sprint(1 + i%6) }},
	{"flags", "set('gift','express','fragile','insured','signature')", -7, func(i int) any { return fmt.Sprint(i % 32) }},
	{"amount", "decimal(12,2)", 3, func(i int) any { return fmt.Sprintf("%d.%02d", 100+i*7, i%100) }},
	{"tax", "decimal(10,4)", 3, func(i int) any { return "1.2345" }},
	{"currency", "char(3)", 1, func(i int) any { return "CNY" }},
	{"quantity", "smallint(6)", 5, func(i int) any { return fmt.Sprint(1 + i%9) }},
	{"weight", "double", 8, func(i int) any { return "0.75" }},
	{"paid", "bit(1)", -7, func(i int) any { return fmt.Sprint(i % 2) }},
	{"archived", "tinyint(1)", -6, func(i int) any { return "0" }},
	{"created_at", "datetime(3)", 93, func(i int) any { return "2026-12-07 10:11:12.345" }},
	{"updated_at", "timestamp", 93, func(i int) any { return "2026-12-07 10:11:13" }},
	{"ship_date", "date", 91, func(i int) any { return "2026-12-09" }},
	{"window", "time", 92, func(i int) any { return "08:30:00" }},
	{"customer_email", "varchar(255)", 12, func(i int) any { return fmt.Sprintf("customer%d@example.com", i) }},
	{"address", "varchar(512)", 12, func(i int) any { return "上海市浦东新区世纪大道100号" }},
	{"remark", "text", 2005, func(i int) any { return nil }},
	{"attrs", "json", 12, func(i int) any { return `{"channel":"app","coupon":null}` }},
	{"version", "bigint(20) unsigned", -5, func(i int) any { return fmt.Sprint(7 + i) }},
}

// canalBenchMessage is a flat message of typ (INSERT or UPDATE) of rows
// rows of canalBenchColumns; an UPDATE's old holds each row's previous
// status and updated_at.
func canalBenchMessage(typ string, rows int) []byte {
	mysqlTypes, sqlTypes := map[string]string{}, map[string]int{}
	var data, old []map[string]any
	for i := range rows {
		row := map[string]any{}
		for _, c := range canalBenchColumns {
			row[c.name] = c.value(i)
		}
		data = append(data, row)
		if typ == "UPDATE" {
			old = append(old, map[string]any{"status": "1", "updated_at": "2026-12-07 10:11:12"})
		}
	}
	for _, c := range canalBenchColumns {
		mysqlTypes[c.name], sqlTypes[c.name] = c.mysqlType, c.sqlType
	}
	msg, err := json.Marshal(map[string]any{
		"data": data, "old": old, "database": "shop", "table": "orders", "pkNames": []string{"id"},
		"isDdl": false, "type": typ, "es": 1796638273000, "ts": 1796638273412, "id": 1234, "sql": "",
		"mysqlType": mysqlTypes, "sqlType": sqlTypes,
	})
	if err != nil {
		panic(err)
	}
	return msg
}

// BenchmarkDecodeCanalRows decodes flat messages of several rows of ~20
// typed columns (an ENUM, a SET, DECIMALs, DATETIMEs, BITs), as Canal
// sends a statement's rows: allocs/op are per message.
func BenchmarkDecodeCanalRows(b *testing.B) {
	for _, bc := range []struct {
		typ  string
		rows int
	}{{"INSERT", 1}, {"INSERT", 8}, {"UPDATE", 8}} {
		msg := canalBenchMessage(bc.typ, bc.rows)
		b.Run(fmt.Sprintf("%s_%drows", strings.ToLower(bc.typ), bc.rows), func(b *testing.B) {
			d, err := NewDecoder(Options{Format: FormatCanal})
			if err != nil {
				b.Fatal(err)
			}
			var changes []Change
			if changes, err = d.Decode(changes[:0], "shop", nil, msg); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if changes, err = d.Decode(changes[:0], "shop", nil, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*bc.rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
