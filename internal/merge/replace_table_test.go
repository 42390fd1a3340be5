package merge

import (
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// MariaDB's CREATE OR REPLACE TABLE drops the table it names, if it
// exists, and creates it again: the table holds none of its rows from
// before the statement (the rows of a CREATE … SELECT come after it, as
// row events). So the model holds none either, in source order, as after
// a DROP TABLE, in each format's message of the statement: Canal's DDL
// message (CREATE, or QUERY where its parser does not read the
// statement), Debezium's schema change (a CREATE of the table, from the
// MariaDB connector), Maxwell's table-create (with output_ddl). A row
// inserted after it stays; CREATE OR REPLACE TEMPORARY TABLE and a plain
// CREATE TABLE change nothing. Found by a hunt: the statement was taken
// for DDL of no row, and the model kept every row the replaced table had.
func TestCreateOrReplaceTableEmptiesItsModel(t *testing.T) {
	t.Run("canal", func(t *testing.T) {
		l := newFormatLoader(t, cdc.FormatCanal)
		l.raw(0, "example", canalMsg("INSERT", 1589373560000, 1, `[{"id":"1","name":"a"},{"id":"2","name":"b"}]`, ""))
		ddl := func(typ, sql string, es, batch int) string {
			return `{"data":null,"database":"test","es":` + itoa(es) + `,"id":` + itoa(batch) + `,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,` +
				`"sql":"` + sql + `","sqlType":null,"table":"orders","ts":` + itoa(es) + `,"type":"` + typ + `"}`
		}
		l.raw(0, "example", ddl("CREATE", "CREATE TEMPORARY TABLE orders (id bigint)", 1589373561000, 2))
		l.raw(0, "example", ddl("CREATE", "CREATE TABLE IF NOT EXISTS orders (id bigint primary key, name varchar(255))", 1589373562000, 3))
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "1|a", "2|b")
		l.raw(0, "example", ddl("QUERY", "CREATE OR REPLACE TABLE orders (id bigint primary key, name varchar(255))", 1589373563000, 4))
		l.raw(0, "example", canalMsg("INSERT", 1589373564000, 5, `[{"id":"3","name":"c"}]`, ""))
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "3|c")
	})
	t.Run("debezium", func(t *testing.T) {
		l := newChangeLoader(t)
		l.topic = "dbserver1.db.orders"
		l.change(0, "orders", "c", 100, row(1, "a"), "id")
		l.change(0, "orders", "c", 300, row(3, "after"), "id")
		l.flush()
		l.mustMerge()
		l.raw(2, "dbserver1", `{"source":{"connector":"mariadb","name":"dbserver1","ts_ms":1700000000000,"snapshot":"false","db":"db","table":"orders",`+
			`"file":"mysql-bin.000001","pos":200,"row":0},"ts_ms":1700000000001,"databaseName":"db","schemaName":null,`+
			`"ddl":"CREATE OR REPLACE TABLE orders (id INT PRIMARY KEY, v VARCHAR(10))","tableChanges":[{"type":"CREATE","id":"\"db\".\"orders\"","table":null}]}`)
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "3|after")
	})
	t.Run("maxwell", func(t *testing.T) {
		l := newFormatLoader(t, cdc.FormatMaxwell)
		l.raw(0, "maxwell", maxwellMsg("insert", 1589373560, `{"id":1,"name":"a"}`, ""))
		l.raw(0, "maxwell", `{"type":"table-create","database":"test","table":"orders","def":{},"ts":1589373561000,"sql":"CREATE OR REPLACE TABLE test.orders (id int primary key, name text)"}`)
		l.raw(0, "maxwell", maxwellMsg("insert", 1589373562, `{"id":2,"name":"b"}`, ""))
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "2|b")
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
