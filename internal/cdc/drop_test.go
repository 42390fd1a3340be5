package cdc

import (
	"strings"
	"testing"
)

// debeziumDrop is the message a Debezium MySQL connector writes to its
// schema change topic (named as the server, topic.prefix) for DROP TABLE
// inventory.customers: the shape of shared-mariadb-mysql.adoc, "Message
// emitted to the connector schema change topic", with what a drop puts
// in it: EventDispatcher.SchemaChangeEventReceiver.schemaChangeRecordValue
// (source, ts_ms, databaseName, schemaName, ddl, tableChanges);
// BinlogDatabaseSchema.parseDdl and DropTableParserListener make one
// event per table dropped, its statement "DROP TABLE `db`.`table`";
// SchemaChangeEvent's DROP adds TableChanges.drop(id), which
// ConnectTableChangeSerializer writes as {type: "DROP", id:
// TableId.toDoubleQuotedString()} with no table. snapshot is "false" when
// the connector reads its binlog.
func debeziumDrop(snapshot string) string {
	return `{"schema":{},"payload":{"source":{"version":"2.7.0.Final","connector":"mysql","name":"dbserver1","ts_ms":1651535750000,` +
		`"snapshot":"` + snapshot + `","db":"inventory","table":"customers","server_id":223344,"file":"mysql-bin.000003","pos":1570,"row":0},` +
		`"ts_ms":1651535750218,"databaseName":"inventory","schemaName":null,"ddl":"DROP TABLE ` + "`inventory`.`customers`" + `",` +
		`"tableChanges":[{"type":"DROP","id":"\"inventory\".\"customers\"","table":null}]}}`
}

// A DROP TABLE that Debezium MySQL reads from the binlog comes on the
// schema change topic alone: it is a truncation of the table at its
// position, as Canal's ERASE and Maxwell's table-drop are. It made no
// change, and the dropped table's rows stayed in its model for good.
func TestDebeziumDropTableIsATruncation(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(nil, "dbserver1", []byte(`{"databaseName":"inventory"}`), []byte(debeziumDrop("false")))
	if err != nil {
		t.Fatal(err)
	}
	want := "truncate inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key= pos=3.1570 time=1651535750000000\n"
	if r := render(got); r != want {
		t.Errorf("got\n%s\nwant\n%s", r, want)
	}
	// Without the schema wrapper, and with a table whose name holds a
	// quote (doubled by TableId.quote).
	v := strings.NewReplacer(`{"schema":{},"payload":`, "", `\"customers\"`, `\"cust\"\"omers\"`).Replace(debeziumDrop("false"))
	v = v[:len(v)-1]
	if got, err = d.Decode(got[:0], "dbserver1", nil, []byte(v)); err != nil || len(got) != 1 || got[0].Op != Truncate || got[0].Table.Name != `cust"omers` {
		t.Errorf("without schemas: %s, err %v; want a truncation of inventory.cust\"omers", render(got), err)
	}
}

// A DROP TEMPORARY TABLE drops a session's table, which may have the
// name of a table of the source (shadowing it in that session): Debezium
// signals it as a drop of the name (DropTableParserListener, its ddl
// the statement's start and the table), and the source table's model
// was emptied.
func TestDebeziumDropTemporaryTableIsNoDrop(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []string{"DROP TEMPORARY TABLE IF EXISTS ", "/* tmp */ drop temporary table "} {
		v := strings.Replace(debeziumDrop("false"), "DROP TABLE ", start, 1)
		if got, err := d.Decode(nil, "dbserver1", nil, []byte(v)); err != nil || len(got) != 0 {
			t.Errorf("%s: %s, err %v; want no change", start, render(got), err)
		}
	}
}

// A snapshot writes DROP TABLE IF EXISTS for each table before its schema
// (BinlogSnapshotChangeEventSource.readTableStructure), also in
// snapshot.mode no_data, which reads no row again (BinlogSchemaHistoryIT:
// "CREATE/DROP for each table"): no drop of the source, and no change,
// or a restarted connector's snapshot would empty every model.
func TestDebeziumSnapshotDropTableIsNoDrop(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, snapshot := range []string{"true", "first", "last"} {
		got, err := d.Decode(nil, "dbserver1", nil, []byte(debeziumDrop(snapshot)))
		if err != nil || len(got) != 0 {
			t.Errorf("snapshot %s: %s, err %v; want no change", snapshot, render(got), err)
		}
	}
}

// Maxwell writes a DROP DATABASE as a database-drop message of the
// database alone (ResolvedDatabaseDrop, named "database-drop" by
// ResolvedSchemaChange's JsonSubTypes; DDLMap.toJSON adds ts, sql and,
// with output_binlog_position, position; docs/dataformat.md lists the
// DDL types). It drops every table of the database: each table of it the
// decoder has seen, or an earlier process (the registry's claim), is
// truncated at its position; no other database's. It made no change, and
// the tables' rows stayed in their models.
func TestMaxwellDatabaseDropTruncatesItsTables(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatMaxwell})
	if err != nil {
		t.Fatal(err)
	}
	d.Claim("cdc_test_items_log", Registered{Database: "test", Table: "items"}) // seen by an earlier run
	for _, v := range []string{
		`{"database":"test","table":"orders","type":"insert","ts":1589373561,"position":"mysql-bin.000003:1000","data":{"id":1},"primary_key_columns":["id"]}`,
		`{"database":"other","table":"orders","type":"insert","ts":1589373561,"position":"mysql-bin.000003:1100","data":{"id":1},"primary_key_columns":["id"]}`,
	} {
		if _, err := d.Decode(nil, "maxwell", nil, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	// A DDL message's ts is in milliseconds (DDLMap.toJSON writes the
	// binlog event's header time; docs/dataformat.md: "ts":1477053126000),
	// a row's in seconds: read as seconds, the truncations' source time was
	// 1000 times too late, past every hour the done marks wait for.
	decodeWant(t, d, "maxwell", `{"type":"database-drop","database":"test","ts":1589373562000,"sql":"DROP DATABASE test","position":"mysql-bin.000003:1200"}`,
		"truncate test.items log=cdc_test_items_log model=cdc_test_items key= pos=3.1200.0 time=1589373562000000\n"+
			"truncate test.orders log=cdc_test_orders_log model=cdc_test_orders key= pos=3.1200.0 time=1589373562000000\n")
	// A database of no table seen: nothing to truncate.
	if got, err := d.Decode(nil, "maxwell", nil, []byte(`{"type":"database-drop","database":"empty","ts":1589373562,"sql":"DROP DATABASE empty"}`)); err != nil || len(got) != 0 {
		t.Errorf("drop of a database of no table: %s, err %v", render(got), err)
	}
}

// Debezium MySQL writes a DROP DATABASE as a schema change of type
// DATABASE (DropDatabaseParserListener signals the database's drop, not
// its tables'; BinlogDatabaseSchema.parseDdl): databaseName, the ddl and
// no tableChanges. Each table of the database the decoder knows is
// truncated; the DROP DATABASE IF EXISTS of a snapshot is none.
func TestDebeziumDropDatabaseTruncatesItsTables(t *testing.T) {
	d := debeziumWithCustomers(t)
	drop := func(snapshot string) string {
		return `{"source":{"connector":"mysql","name":"dbserver1","ts_ms":1651535750000,"snapshot":"` + snapshot + `","db":"inventory","table":null,` +
			`"file":"mysql-bin.000003","pos":2570,"row":0},"ts_ms":1651535750218,"databaseName":"inventory","schemaName":null,` +
			`"ddl":"/* tool */ drop schema if exists inventory","tableChanges":[]}`
	}
	decodeWant(t, d, "dbserver1", drop("false"),
		"truncate inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key= pos=3.2570 time=1651535750000000\n")
	if got, err := d.Decode(nil, "dbserver1", nil, []byte(drop("true"))); err != nil || len(got) != 0 {
		t.Errorf("a snapshot's DROP DATABASE IF EXISTS: %s, err %v; want no change", render(got), err)
	}
}

// Canal's DDL parser makes no DdlResult of a DROP DATABASE
// (DruidDdlParser.parse handles no SQLDropDatabaseStatement), so
// LogEventConvert.parseQueryEvent sends it as a QUERY with isDdl true and
// no table; its sql names the database, whose known tables it truncates.
func TestCanalDropDatabaseTruncatesItsTables(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	ins := `{"data":[{"id":"1"}],"database":"test","es":1589373560000,"id":1,"isDdl":false,"mysqlType":{"id":"bigint(20)"},"old":null,` +
		`"pkNames":["id"],"sql":"","sqlType":{"id":-5},"table":"orders","ts":1589373560001,"type":"INSERT"}`
	if _, err := d.Decode(nil, "example", nil, []byte(ins)); err != nil {
		t.Fatal(err)
	}
	drop := func(sql string) string {
		return `{"data":null,"database":"","es":1589373561000,"id":3,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,` +
			`"sql":"` + sql + `","sqlType":null,"table":"","ts":1589373561005,"type":"QUERY"}`
	}
	decodeWant(t, d, "example", drop("DROP DATABASE IF EXISTS `test`"),
		"truncate test.orders log=cdc_test_orders_log model=cdc_test_orders key= pos=1589373561000.1589373561005.3 time=1589373561000000\n")
	if got, err := d.Decode(nil, "example", nil, []byte(drop("drop schema other"))); err != nil || len(got) != 0 {
		t.Errorf("drop of a database of no table seen: %s, err %v", render(got), err)
	}
}

// Canal's DDL parser makes a DdlResult per table of a DROP TABLE
// (DruidDdlParser.parse), but the message's header names the first alone:
// `DROP TABLE a, b` emptied a's model and left b's rows. The tables are
// read from its sql, an unqualified one in the message's database. A DROP
// TEMPORARY TABLE (Druid's statement of the same kind) drops a session's
// table, which may shadow a source table whose rows stay.
func TestCanalDropOfSeveralTablesTruncatesEach(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	erase := func(sql string) string {
		return `{"data":null,"database":"test","es":1589373561000,"id":3,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,` +
			`"sql":"` + sql + `","sqlType":null,"table":"a","ts":1589373561005,"type":"ERASE"}`
	}
	const at = " key= pos=1589373561000.1589373561005.3 time=1589373561000000\n"
	decodeWant(t, d, "example", erase("DROP TABLE IF EXISTS a, `b`, other.c /* generated by server */"),
		"truncate test.a log=cdc_test_a_log model=cdc_test_a"+at+
			"truncate test.b log=cdc_test_b_log model=cdc_test_b"+at+
			"truncate other.c log=cdc_other_c_log model=cdc_other_c"+at)
	// TABLES is MySQL's synonym (table_or_tables): it named a alone.
	decodeWant(t, d, "example", erase("DROP TABLES a, b"),
		"truncate test.a log=cdc_test_a_log model=cdc_test_a"+at+
			"truncate test.b log=cdc_test_b_log model=cdc_test_b"+at)
	decodeWant(t, d, "example", erase("DROP TEMPORARY TABLE a"), "")
	// A statement it cannot read: the table the message names, as before.
	decodeWant(t, d, "example", erase("DROP TABLE a b"), "truncate test.a log=cdc_test_a_log model=cdc_test_a"+at+"  sql DROP TABLE a b\n")
}

// decodeWant decodes value of topic and compares the changes, rendered,
// with want.
func decodeWant(t *testing.T, d *Decoder, topic, value, want string) {
	t.Helper()
	got, err := d.Decode(nil, topic, nil, []byte(value))
	if r := render(got); err != nil || r != want {
		t.Errorf("got\n%s (err %v)\nwant\n%s", r, err, want)
	}
}

// A Debezium schema change topic carries the DDL of every database of its
// server, captured or not (EventDispatcher dispatches a database's DDL
// with no table filter; schema.history.internal.store.only.captured.tables.ddl
// is false by default), and one run may read several servers (topic_regex
// '^(dbserver[12](\.|$)|…)'). A DROP DATABASE or DROP TABLE of server
// dbserver2 names a database of dbserver2: it does not truncate a table
// whose changes came from dbserver1 only, whose database has the same
// name (its positions are another binlog's, too). It emptied dbserver1's
// models.
func TestDebeziumDropOfAnotherServerKeepsTables(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(nil, "dbserver1.inventory.customers", nil, []byte(`{"op":"c","after":{"id":1},"source":{"name":"dbserver1","db":"inventory","table":"customers","file":"mysql-bin.000003","pos":100}}`)); err != nil {
		t.Fatal(err)
	}
	dropDB := func(server string) string {
		return `{"source":{"connector":"mysql","name":"` + server + `","ts_ms":1651535750000,"snapshot":"false","db":"inventory","table":null,` +
			`"file":"mysql-bin.000009","pos":2570,"row":0},"ts_ms":1651535750218,"databaseName":"inventory","schemaName":null,` +
			`"ddl":"DROP DATABASE inventory","tableChanges":[]}`
	}
	dropTable := func(server string) string {
		return strings.Replace(debeziumDrop("false"), `"name":"dbserver1"`, `"name":"`+server+`"`, 1)
	}
	for _, v := range []string{dropDB("dbserver2"), dropTable("dbserver2")} {
		if got, err := d.Decode(nil, "dbserver2", nil, []byte(v)); err != nil || len(got) != 0 {
			t.Errorf("a drop of dbserver2: %s, err %v; want no change of dbserver1's table", render(got), err)
		}
	}
	// dbserver1's own drops still truncate it.
	decodeWant(t, d, "dbserver1", dropDB("dbserver1"),
		"truncate inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key= pos=9.2570 time=1651535750000000\n")
	decodeWant(t, d, "dbserver1", dropTable("dbserver1"),
		"truncate inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key= pos=3.1570 time=1651535750000000\n")
}

// Debezium before 1.0 wrote source.snapshot as a boolean (DBZ-1295 made
// it the string enum), and its snapshot wrote DROP DATABASE IF EXISTS
// and DROP TABLE IF EXISTS before each database's and table's schema on
// the schema change topic (databaseName, ddl): a snapshot's, no drop. A
// snapshot value that is not false, of any JSON type, is a snapshot; it
// was read as none, and each snapshot emptied the database's models.
func TestDebeziumBooleanSnapshotDropIsNoDrop(t *testing.T) {
	d := debeziumWithCustomers(t)
	drop := func(snapshot string) string {
		return `{"source":{"name":"dbserver1","server_id":0,"ts_sec":0,"file":"mysql-bin.000003","pos":2570,"row":0,"snapshot":` + snapshot + `},` +
			`"databaseName":"inventory","ddl":"DROP DATABASE IF EXISTS ` + "`inventory`" + `"}`
	}
	if got, err := d.Decode(nil, "dbserver1", nil, []byte(drop("true"))); err != nil || len(got) != 0 {
		t.Errorf("a snapshot's DROP DATABASE IF EXISTS (snapshot true, a boolean): %s, err %v; want no change", render(got), err)
	}
	decodeWant(t, d, "dbserver1", drop("false"),
		"truncate inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key= pos=3.2570 time=0\n")
}

// debeziumWithCustomers is a Debezium decoder that has decoded a change
// of inventory.customers.
func debeziumWithCustomers(t *testing.T) *Decoder {
	t.Helper()
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(nil, "dbserver1.inventory.customers", nil, []byte(`{"op":"c","after":{"id":1},"source":{"db":"inventory","table":"customers","file":"mysql-bin.000003","pos":100}}`)); err != nil {
		t.Fatal(err)
	}
	return d
}

// Canal's message of a DROP TABLE names the first table's database
// (results.get(0).getSchemaName(): the one the statement qualifies it
// with), not the session's: after `USE test`, `DROP TABLE other.a, b`
// comes as database "other", and b is test.b, a database the message does
// not carry. Reading b in the message's database emptied other.b's model,
// a table the statement left alone. Such a drop is dead-lettered with its
// reason; one whose names are all qualified, or whose first is not, is
// read as before.
func TestCanalDropOfSeveralTablesKnowsNoSessionDatabase(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	erase := func(db, table, sql string) string {
		return `{"data":null,"database":"` + db + `","es":1589373561000,"id":3,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,` +
			`"sql":"` + sql + `","sqlType":null,"table":"` + table + `","ts":1589373561005,"type":"ERASE"}`
	}
	got, err := d.Decode(nil, "example", nil, []byte(erase("other", "a", "DROP TABLE `other`.`a`,`b` /* generated by server */")))
	if err == nil {
		t.Errorf("a DROP TABLE of other.a and an unqualified b decoded as\n%s\nwant a dead letter: b's database is the session's, not in the message", render(got))
	}
	const at = " key= pos=1589373561000.1589373561005.3 time=1589373561000000\n"
	decodeWant(t, d, "example", erase("other", "a", "DROP TABLE other.a, test.b"),
		"truncate other.a log=cdc_other_a_log model=cdc_other_a"+at+
			"truncate test.b log=cdc_test_b_log model=cdc_test_b"+at)
	decodeWant(t, d, "example", erase("other", "a", "DROP TABLE other.a"),
		"truncate other.a log=cdc_other_a_log model=cdc_other_a"+at)
}

// MySQL writes the implicit drop of a session's temporary tables (at its
// end, where their creation was logged) as `DROP /*!40005 TEMPORARY */
// TABLE IF EXISTS t`: the text of an executable comment is part of the
// statement, not a comment, and the drop is of a temporary table whose
// name may be a source table's. Read as a comment, the drop emptied the
// source table's model (Debezium's ddl keeps the statement's start,
// Canal's sql all of it). So is `/*!40000 DROP DATABASE IF EXISTS db*/`
// (mysqldump's --add-drop-database) a DROP DATABASE.
func TestExecutableCommentIsPartOfTheStatement(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []string{"DROP /*!40005 TEMPORARY */ TABLE IF EXISTS ", "drop /*M!100100 temporary*/ table "} {
		v := strings.Replace(debeziumDrop("false"), "DROP TABLE ", start, 1)
		if got, err := d.Decode(nil, "dbserver1", nil, []byte(v)); err != nil || len(got) != 0 {
			t.Errorf("Debezium %s: %s, err %v; want no change", start, render(got), err)
		}
	}
	c, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	erase := `{"data":null,"database":"test","es":1589373561000,"id":3,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,` +
		`"sql":"DROP /*!40005 TEMPORARY */ TABLE IF EXISTS ` + "`a`" + `","sqlType":null,"table":"a","ts":1589373561005,"type":"ERASE"}`
	decodeWant(t, c, "example", erase, "")
	if name, ok := droppedDatabase([]byte("/*!40000 DROP DATABASE IF EXISTS `shop`*/")); !ok || name != "shop" {
		t.Errorf("mysqldump's drop of database shop read as %q, %v", name, ok)
	}
	if toks := ddlTokens([]byte("DROP /*!40005 TEMPORARY */ TABLE /* x */ t"), 10); len(toks) != 4 || toks[1].text != "TEMPORARY" || toks[3].text != "t" {
		t.Errorf("tokens %+v, want DROP TEMPORARY TABLE t", toks)
	}
}
