package cdc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tracelake/tracelake/internal/schema"
)

// mysqlKind is how a MySQL value in Canal's text becomes its NDJSON.
type mysqlKind uint8

const (
	textKind     mysqlKind = iota // a string as it is
	intKind                       // "123" → 123
	decimalKind                   // "10.50" as it is: exact decimal text
	floatKind                     // "1.5" → 1.5
	bitKind                       // bit(1): "1" → true
	dateTimeKind                  // "2020-05-13 20:38:35.123" → µs, as UTC
	timeKind                      // "-12:30:00" → µs
	jsonKind                      // a string holding JSON → the JSON
	enumKind                      // an ENUM's index: "2" → its label, "large"
	setKind                       // a SET's bit mask: "5" → its labels, "a,c"
)

// mysqlType is a column's type as Canal's mysqlType names it.
type mysqlType struct {
	typ              schema.Type
	kind             mysqlKind
	precision, scale int
	// labels are an ENUM's or SET's values in order, each as the text of a
	// JSON string without its quotes.
	labels [][]byte
}

// parseMySQLType maps a MySQL column type (bigint(20) unsigned,
// decimal(10,2), datetime(3)…) to a logical type. tinyint(1) is an Int32,
// not a Bool: MySQL stores 0..127 in it, and Debezium reads it as a
// number too. bigint unsigned and bit(64) are a Decimal(20,0), beyond
// int64. Dates are
// Timestamps (midnight, UTC); a TIME is an Int64 of µs; binary types are
// the text Canal writes (ISO-8859-1 of the bytes). An ENUM or a SET is a
// String of its labels, which Canal does not write (see enumLabels).
func parseMySQLType(t []byte) mysqlType {
	var lower [64]byte
	t = bytes.TrimSpace(t)
	original := t
	if len(t) <= len(lower) {
		for i, c := range t {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		t = lower[:len(t)]
	} else {
		// An ENUM's or SET's labels soon make its type longer, and a type
		// keeps the case its DDL wrote (ENUM): unread, its index was
		// stored as text. Its labels are read from original, and parsing
		// them allocates anyway.
		t = bytes.ToLower(t)
	}
	unsigned := bytes.Contains(t, []byte("unsigned"))
	base, args := t, []byte(nil)
	if i := bytes.IndexAny(t, "( "); i >= 0 {
		base = t[:i]
		if t[i] == '(' {
			if j := bytes.IndexByte(t[i:], ')'); j > 0 {
				args = t[i+1 : i+j]
			}
		}
	}
	switch string(base) {
	case "tinyint", "smallint", "mediumint", "year":
		return mysqlType{typ: schema.Int32, kind: intKind}
	case "int", "integer":
		if unsigned {
			return mysqlType{typ: schema.Int64, kind: intKind}
		}
		return mysqlType{typ: schema.Int32, kind: intKind}
	case "bigint":
		if unsigned {
			return mysqlType{typ: schema.Decimal, kind: decimalKind, precision: 20}
		}
		return mysqlType{typ: schema.Int64, kind: intKind}
	case "decimal", "numeric", "dec", "fixed":
		p, s := 10, 0 // MySQL's default precision and scale
		if args != nil {
			ps := bytes.SplitN(args, []byte(","), 2)
			p, _ = strconv.Atoi(string(bytes.TrimSpace(ps[0])))
			if len(ps) == 2 {
				s, _ = strconv.Atoi(string(bytes.TrimSpace(ps[1])))
			}
		}
		return mysqlType{typ: schema.Decimal, kind: decimalKind, precision: p, scale: s}
	case "float", "double", "real":
		return mysqlType{typ: schema.Float64, kind: floatKind}
	case "bit":
		if args == nil || string(args) == "1" {
			return mysqlType{typ: schema.Bool, kind: bitKind}
		}
		if n, _ := strconv.Atoi(string(bytes.TrimSpace(args))); n >= 64 {
			// Canal writes a BIT(n) as the unsigned number of its bits
			// (RowsLogBuffer.fetchValue: getBeUlong64 for 8 bytes): a
			// BIT(64) with its high bit set is beyond a BIGINT, as a
			// BIGINT UNSIGNED is.
			return mysqlType{typ: schema.Decimal, kind: decimalKind, precision: 20}
		}
		return mysqlType{typ: schema.Int64, kind: intKind}
	case "bool", "boolean":
		return mysqlType{typ: schema.Bool, kind: bitKind}
	case "date", "datetime", "timestamp":
		return mysqlType{typ: schema.Timestamp, kind: dateTimeKind}
	case "time":
		return mysqlType{typ: schema.Int64, kind: timeKind}
	case "json":
		return mysqlType{typ: schema.JSON, kind: jsonKind}
	case "enum", "set":
		if labels, ok := enumLabels(original[len(base):]); ok {
			kind := enumKind
			if string(base) == "set" {
				kind = setKind
			}
			return mysqlType{typ: schema.String, kind: kind, labels: labels}
		}
	}
	return mysqlType{typ: schema.String, kind: textKind}
}

// enumLabels reads the labels of an ENUM's or SET's type, args its
// "('small','large')" as Canal's mysqlType writes it, each as the text of
// a JSON string. That type is Druid's rendering of SHOW CREATE TABLE
// (TableMetaCache.getTableMetaByDB, MemoryTableMeta.processTableElement:
// each label's SQLCharExpr.toString, SQLASTOutputVisitor.printChars):
// Druid's lexer has undone MySQL's escapes (\\, \n, \0), and it doubles a
// quote and writes every other character, a backslash too, as it is. Read
// as MySQL's escapes, a label C:\new was C:, a line break, ew. (Canal's
// fallback when SHOW CREATE TABLE fails, DESC, writes MySQL's escapes; the
// two cannot be told apart, and Druid's is the rendering Canal sends.)
// Canal writes an ENUM's value as its 1-based index and a SET's as its bit mask, the binlog's form
// (RowsLogBuffer.fetchValue: MYSQL_TYPE_ENUM an int, MYSQL_TYPE_SET a long;
// LogEventConvert writes String.valueOf(value); alibaba/canal issues #157,
// #2610), so the label is read from the type: stored as the index, the
// model held "2" where the source's row holds 'large'. ok is false when
// args is not such a list: the value is then taken as text, as before.
//
// Each label is written as encoding/json writes a string, as it always
// was: envelope.AppendString would write <, >, &, U+2028 and U+2029 as
// they are, a backspace as \u0008 and keep a byte that is not UTF-8,
// which encoding/json writes as \u003c…, \b and U+FFFD, so the values
// stored would change. It runs once
// per mysqlType text a decoder keeps (canalTypeCache), not per message.
func enumLabels(args []byte) (labels [][]byte, ok bool) {
	args = bytes.TrimSpace(args)
	if len(args) < 2 || args[0] != '(' || args[len(args)-1] != ')' {
		return nil, false
	}
	args = args[1 : len(args)-1]
	for len(args) > 0 {
		if args[0] != '\'' {
			return nil, false
		}
		var label []byte
		i := 1
		for ; i < len(args); i++ {
			if args[i] == '\'' {
				if i+1 < len(args) && args[i+1] == '\'' {
					label = append(label, '\'')
					i++
					continue
				}
				break
			}
			label = append(label, args[i])
		}
		if i == len(args) {
			return nil, false // no closing quote
		}
		quoted, err := json.Marshal(string(label))
		if err != nil {
			return nil, false
		}
		labels = append(labels, quoted[1:len(quoted)-1])
		args = bytes.TrimSpace(args[i+1:])
		if len(args) > 0 {
			if args[0] != ',' {
				return nil, false
			}
			args = bytes.TrimSpace(args[1:])
		}
	}
	return labels, len(labels) > 0
}

// javaSQLTypes maps Canal's sqlType (java.sql.Types) for a column mysqlType
// does not name.
var javaSQLTypes = map[int]mysqlType{
	-6: {typ: schema.Int32, kind: intKind}, 5: {typ: schema.Int32, kind: intKind}, 4: {typ: schema.Int32, kind: intKind},
	-5: {typ: schema.Int64, kind: intKind},
	2:  {typ: schema.Decimal, kind: decimalKind}, 3: {typ: schema.Decimal, kind: decimalKind},
	6: {typ: schema.Float64, kind: floatKind}, 7: {typ: schema.Float64, kind: floatKind}, 8: {typ: schema.Float64, kind: floatKind},
	16: {typ: schema.Bool, kind: bitKind},
	91: {typ: schema.Timestamp, kind: dateTimeKind}, 93: {typ: schema.Timestamp, kind: dateTimeKind},
	92: {typ: schema.Int64, kind: timeKind},
}

// canalColumn is a column's type in a Canal message.
type canalColumn struct {
	name []byte
	// source is the type's name: the mysqlType, or "sqlType N".
	source []byte
	mysqlType
}

func (d *Decoder) canal(dst []Change, value []byte) ([]Change, error) {
	var data, old, mysqlTypes, sqlTypeV, pkNames, db, tbl, typ, isDDL, es, ts, id, sql []byte
	it, _ := open(value, '{')
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		switch string(k) {
		case "data":
			data = v
		case "old":
			old = v
		case "mysqlType":
			mysqlTypes = v
		case "sqlType":
			sqlTypeV = v
		case "pkNames":
			pkNames = v
		case "database":
			db = text(v)
		case "table":
			tbl = text(v)
		case "type":
			typ = text(v)
		case "isDdl":
			isDDL = v
		case "es":
			es = v
		case "ts":
			ts = v
		case "id":
			id = v
		case "sql":
			sql = v
		}
	}
	if typ == nil {
		return dst, d.errorf("type is missing")
	}
	if statementText(typ, isDDL) {
		return dst, nil
	}
	var o Op
	switch string(typ) {
	case "INSERT":
		o = Insert
	case "UPDATE":
		o = Update
	case "DELETE":
		o = Delete
	case "TRUNCATE", "ERASE":
		// ERASE is a DROP TABLE (Canal's EventType): the source table
		// holds no row after it, so its model holds none of the rows
		// changed before it either, as after a truncation; a table
		// created again under the name starts empty.
		o = Truncate
	case "CREATE", "ALTER", "RENAME", "CINDEX", "DINDEX", "QUERY":
		o = SchemaChange
	case "XAROLLBACK":
		return dst, d.errorf("XAROLLBACK: an XA transaction was rolled back at the source after its XA PREPARE, whose rows Canal had sent and the models took; " +
			"reconcile the tables it changed against the source (tracelake reconcile --source), then delete this dead letter")
	default:
		return dst, d.errorf("type %q is not one of INSERT, UPDATE, DELETE or a DDL type", typ)
	}
	if ddl := string(isDDL) == "true"; ddl == o.HasRow() {
		return dst, d.errorf("isDdl is %s but type is %s", isDDL, typ)
	}
	if name, ok := droppedDatabase(text(sql)); ok && o == SchemaChange {
		// A DROP DATABASE, which Canal's DDL parser does not read
		// (DruidDdlParser.parse makes no DdlResult of it, so the message
		// is a QUERY of no table): the statement names the database.
		if name == "" {
			return dst, d.errorf("a DROP DATABASE whose database cannot be read: %s", clip(sql))
		}
		return d.dropDatabase(dst, []byte(name), canalPosition(es, ts, id), millisToMicros(es), nil)
	}
	if rdb, name, ok := replacedTable(text(sql)); ok && o == SchemaChange {
		// MariaDB's CREATE OR REPLACE TABLE (a CREATE, or a QUERY where
		// Canal's parser does not read it): the table created again
		// holds none of the rows before it, as after a DROP TABLE.
		if rdb == "" {
			rdb = string(db)
		}
		if rdb == "" {
			return dst, d.errorf("a CREATE OR REPLACE TABLE of %q whose database is not known", name)
		}
		table, err := d.router.route([]byte(rdb), nil, []byte(name))
		if err != nil {
			return dst, routeError(err)
		}
		return truncation(dst, table, canalPosition(es, ts, id), millisToMicros(es)), nil
	}
	if db == nil || tbl == nil {
		return dst, d.errorf("database or table is missing")
	}
	if string(typ) == "ERASE" {
		if dropped, temporary, ok := droppedTables(text(sql)); ok {
			return d.canalErase(dst, db, dropped, temporary, canalPosition(es, ts, id), millisToMicros(es))
		}
	}
	table, err := d.router.route(db, nil, tbl)
	if err != nil {
		return dst, routeError(err)
	}
	sourceTime := millisToMicros(es)
	at := canalPosition(es, ts, id)
	if !o.HasRow() {
		dst, c := next(dst)
		c.Op, c.Table, c.SourceTime, c.Position = o, table, sourceTime, at
		c.Statement = text(sql)
		return dst, nil
	}
	rows := count(data)
	if rows == 0 {
		return dst, d.errorf("%s of %s.%s: data holds no row", typ, db, tbl)
	}
	types := d.canalTypes.types(mysqlTypes, sqlTypeV)
	var keys [][]byte
	ks, _ := open(pkNames, '[')
	for v, ok := ks.element(); ok; v, ok = ks.element() {
		keys = append(keys, text(v))
	}
	var olds [][]byte // per row of data: its entry of old, nil for none
	if o == Update && !isNull(old) {
		if olds, err = canalOlds(data, old, rows); err != nil {
			return dst, d.errorf("%s.%s: %v", db, tbl, err)
		}
	}
	rowIt, _ := open(data, '[')
	for i := range rows {
		row, _ := rowIt.element()
		var c *Change
		dst, c = next(dst)
		c.Op, c.Table, c.SourceTime = o, table, sourceTime
		c.Position = at
		table.keyNames(c, keys)
		if c.Columns, err = c.canalRow(c.Columns, row, types); err != nil {
			return dst, d.errorf("%s.%s row %d: %v", db, tbl, i, err)
		}
		if olds != nil && olds[i] != nil {
			if c.Before, err = c.overlay(olds[i], false, func(col *Column, v []byte) error {
				return c.canalValue(col, findCanal(types, col.Name, -1), v)
			}); err != nil {
				return dst, d.errorf("%s.%s row %d: old: %v", db, tbl, i, err)
			}
		}
		c.settle(c.Columns)
		c.settle(c.Before)
	}
	return dst, nil
}

// canalOlds pairs the entries of an UPDATE's old with the rows of data
// (rows of them) they are the previous values of: the result holds, per
// row, its entry or nil. Canal writes an entry for a row only when it
// holds a column (MQMessageUtils.messageConverter: "if
// (!rowOld.isEmpty()) old.add(rowOld)"), and a row's entry holds its
// before values of every column in updateSet, the set of the changed
// columns of the message's rows so far: one set for the whole message,
// declared before the loop over the rows, never cleared. So a row is left
// out only while neither it nor a row before it changed a column Canal
// sends (its change was in a column canal.instance.filter.field or
// filter.black.field leaves out): the rows left out are the first ones,
// old's entries are the last rows', in order, and each entry holds the
// columns of the one before it, with the row's values before the
// statement, changed or not. Refusing such a message lost every row of
// it for good (a replay decodes it the same way). Pairing an entry with
// the first row its columns differ in gave a row the old key of another
// (a composite key's part): the model deleted a row the statement did not
// touch and kept the one it moved.
//
// The first entry's columns are those its row changed (the set was empty
// before it): each has another value in its row. An old that is not of
// that form (an entry without a column of the one before it, a first
// entry whose row holds one of its values) is refused with the reason:
// which row an entry belongs to is not known.
func canalOlds(data, old []byte, rows int) ([][]byte, error) {
	var entries [][]byte
	it, ok := open(old, '[')
	if !ok {
		return nil, errorString("old is not a JSON array")
	}
	for v, ok := it.element(); ok; v, ok = it.element() {
		entries = append(entries, v)
	}
	out := make([][]byte, rows)
	if len(entries) > rows {
		return nil, fmt.Errorf("data has %d rows but old has %d", rows, len(entries))
	}
	if len(entries) == rows {
		copy(out, entries) // an entry per row: no row was left out
		return out, nil
	}
	first := rows - len(entries) // the first row with an entry
	if len(entries) > 0 {
		rowIt, _ := open(data, '[')
		for i := 0; ; i++ {
			v, _ := rowIt.element()
			if i == first {
				if !oldFits(entries[0], v) {
					return nil, fmt.Errorf("data has %d rows but old has %d, and old's first entry, the previous values of row %d (Canal leaves out the first rows, none of whose columns it sends changed), "+
						"is not: each of its columns must have another value in that row", rows, len(entries), first)
				}
				break
			}
		}
	}
	for j := 1; j < len(entries); j++ {
		if name, ok := holdsColumnsOf(entries[j], entries[j-1]); !ok {
			return nil, fmt.Errorf("data has %d rows but old has %d, and old's entry %d lacks column %q of the entry before it (Canal's entries after the first hold every column a row before changed): "+
				"which rows old leaves out is not known", rows, len(entries), j, name)
		}
	}
	copy(out[first:], entries)
	return out, nil
}

// oldFits says whether entry, an object of old, can be the previous
// values of row: row has each of its members with another value.
func oldFits(entry, row []byte) bool {
	it, ok := open(entry, '{')
	if !ok {
		return false
	}
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		now, found := memberNamed(row, columnName(k))
		if !found || bytes.Equal(now, v) {
			return false
		}
	}
	return true
}

// holdsColumnsOf says whether entry holds every member of prev, and
// names one it lacks.
func holdsColumnsOf(entry, prev []byte) (string, bool) {
	it, ok := open(prev, '{')
	if !ok {
		return "", false
	}
	for k, _, ok := it.member(); ok; k, _, ok = it.member() {
		if _, found := memberNamed(entry, columnName(k)); !found {
			return string(columnName(k)), false
		}
	}
	return "", true
}

// memberNamed is the value of row's member named name (unescaped).
func memberNamed(row, name []byte) ([]byte, bool) {
	it, _ := open(row, '{')
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		if bytes.Equal(columnName(k), name) {
			return v, true
		}
	}
	return nil, false
}

// canalPosition is a flat message's position: (es, ts, id). A flat
// message has no binlog file or offset (FlatMessage's fields: id,
// database, table, pkNames, isDdl, type, es, ts, sql, sqlType, mysqlType,
// data, old, gtid; MQMessageUtils.messageConverter).
//
//   - es is the binlog event's header time (LogEventConvert.createHeader:
//     setExecuteTime(logHeader.getWhen() * 1000L)), whole seconds. It
//     comes first: a change Canal sends again after a restart (from its
//     last flushed cursor) keeps its es, and stays below the changes of
//     later seconds it was followed by.
//   - ts is Canal's wall clock when it made the message
//     (messageConverter: setTs(System.currentTimeMillis()), in the flat
//     message since its first release). Canal reads the binlog in order,
//     one entry after another, so within a second of es it orders the
//     changes across batches, across partitions and across restarts of
//     Canal, as long as Canal's clock does not go back.
//   - id is the batch id (the Message's id, from the meta manager's
//     addBatch in CanalServerWithEmbedded.getWithoutAck), increasing
//     within one start of Canal: it orders the batches made within one
//     millisecond of ts. It is not a part by itself after es: it starts
//     at 1 again with every start of the instance
//     (MemoryMetaManager.MemoryClientIdentityBatch's atomicMaxBatchId =
//     new AtomicLong(1), which FileMixedMetaManager, Canal's default
//     file-instance.xml, inherits; it stores the cursor only), so a
//     change after a restart would sort below one of its second before
//     it.
//
// The messages of one batch and millisecond, and a message's rows, tie,
// and go by Kafka order. gtid is not used: it is the executed GTID set
// (LogEventConvert.createHeader: setGtid(logHeader.getGtidSetStr())), set
// only in GTID mode, and a set of several servers' ranges does not order.
//
// Positions stored before were (es, id) and, before 2026-12-05, (es, id,
// row): as text their second part, a batch id, is below any ts of this
// century, so a change loaded after the upgrade sorts after the stored
// changes of its second, and before those of later seconds.
func canalPosition(es, ts, id []byte) Position {
	return position(uintOf(es), uintOf(ts), uintOf(id))
}

// statementText says whether a flat message of type typ holds a
// statement's text and no row: a QUERY that is no DDL (isDdl false), which
// Canal makes of MySQL's rows-query events (binlog_rows_query_log_events)
// and MariaDB's annotate rows events (binlog_annotate_row_events, on by
// default since 10.2.4), the text of a DML statement whose rows come in
// the messages after it, unless canal.instance.filter.query.dml is set
// (LogEventConvert.parseRowsQueryEvent, parseAnnotateRowsEvent and
// buildQueryEntry, whose RowChange leaves isDdl false; a query event's
// DDL has isDdl true, parseQueryEvent); or an XACOMMIT, an XA COMMIT,
// whose rows came with its XA PREPARE. A dead letter of one would name no
// table, and so hold back the done marks of every table of its topic.
// XAROLLBACK is not one: the rows of its XA PREPARE were sent, and are
// undone at the source only.
func statementText(typ, isDDL []byte) bool {
	switch string(typ) {
	case "QUERY":
		return string(isDDL) == "false"
	case "XACOMMIT":
		return true
	}
	return false
}

// canalTypes lists the columns' types from mysqlType, and from sqlType
// for a column mysqlType lacks. The decoder reads them through its
// canalTypeCache: they are the same for every message of a table.
func canalTypes(mysqlTypes, sqlTypes []byte) []canalColumn {
	var cols []canalColumn
	it, ok := open(mysqlTypes, '{')
	for k, v, more := it.member(); ok && more; k, v, more = it.member() {
		t := text(v)
		cols = append(cols, canalColumn{name: columnName(k), source: t, mysqlType: parseMySQLType(t)})
	}
	it, ok = open(sqlTypes, '{')
	for k, v, more := it.member(); ok && more; k, v, more = it.member() {
		name := columnName(k)
		code, err := strconv.Atoi(string(v))
		if err != nil || findCanal(cols, string(name), -1) != nil {
			continue
		}
		// The zero mysqlType is text.
		cols = append(cols, canalColumn{name: name, source: strconv.AppendInt([]byte("sqlType "), int64(code), 10), mysqlType: javaSQLTypes[code]})
	}
	return cols
}

func findCanal(cols []canalColumn, name string, i int) *canalColumn {
	if i >= 0 && i < len(cols) && string(cols[i].name) == name {
		return &cols[i]
	}
	for j := range cols {
		if string(cols[j].name) == name {
			return &cols[j]
		}
	}
	return nil
}

// canalRow appends the columns of one element of data.
func (c *Change) canalRow(cols []Column, row []byte, types []canalColumn) ([]Column, error) {
	it, ok := open(row, '{')
	if !ok {
		return cols, errorString("the row is not a JSON object")
	}
	nameHint := 0
	for i := 0; ; i++ {
		k, v, ok := it.member()
		if !ok {
			return cols, nil
		}
		cols = append(cols, Column{Name: c.Table.cols.intern(columnName(k), &nameHint)})
		col := &cols[len(cols)-1]
		if err := c.canalValue(col, findCanal(types, col.Name, i), v); err != nil {
			return cols, err
		}
	}
}

// canalValue types and writes one value of a Canal row: Canal writes every
// value as a string, or null.
func (c *Change) canalValue(col *Column, ct *canalColumn, v []byte) error {
	mt := mysqlType{typ: schema.String, kind: textKind}
	if ct != nil {
		mt = ct.mysqlType
		hint := 0
		col.SourceType = c.Table.types.intern(ct.source, &hint)
	}
	col.Type, col.Precision, col.Scale = mt.typ, mt.precision, mt.scale
	if isNull(v) {
		return nil
	}
	if !isString(v) {
		return errorString("column " + strconv.Quote(col.Name) + ": " + clip(v) + " is not a string")
	}
	inner := v[1 : len(v)-1]
	bad := false
	switch mt.kind {
	case textKind:
		col.Value = v
	case intKind:
		// A YEAR of 0 Canal writes as MySQL shows it, "0000"
		// (RowsLogBuffer.fetchValue, MYSQL_TYPE_YEAR): its leading zeros
		// are no part of the number. Refused, its message was
		// dead-lettered.
		for len(inner) > 1 && inner[0] == '0' {
			inner = inner[1:]
		}
		col.Value, bad = inner, !isInteger(inner)
	case floatKind:
		col.Value, bad = inner, !isNumber(inner)
	case decimalKind:
		col.Value, bad = v, !isDecimal(inner)
	case bitKind:
		switch string(inner) {
		case "1", "true":
			col.Value = jsonTrue
		case "0", "false":
			col.Value = jsonFalse
		default:
			bad = true
		}
	case dateTimeKind:
		us, zero, ok := parseDateTime(inner)
		if bad = !ok; ok && !zero {
			c.putInt(col, us)
		}
	case timeKind:
		us, ok := parseTimeOfDay(inner)
		if bad = !ok; ok {
			c.putInt(col, us)
		}
	case jsonKind:
		bad = !c.putJSONText(col, v)
	case enumKind, setKind:
		bad = !c.putLabels(col, mt, inner, v)
	}
	if bad {
		col.Value = nil
		return errorString("column " + strconv.Quote(col.Name) + ": " + clip(v) + " is not a value of " + col.SourceType)
	}
	return nil
}

// putLabels writes the value of an ENUM or SET column: the label of
// index inner (0 is MySQL's error value, ”), or the labels of the bits of
// mask inner joined by commas, as MySQL shows a SET. A value that is not a
// number is a label already (a Canal that writes them) and stays as it is,
// v; false for an index or bit past the labels.
func (c *Change) putLabels(col *Column, mt mysqlType, inner, v []byte) bool {
	n, err := strconv.ParseUint(string(inner), 10, 64)
	if err != nil {
		col.Value = v
		return true
	}
	if mt.kind == enumKind && n > uint64(len(mt.labels)) || mt.kind == setKind && len(mt.labels) < 64 && n>>len(mt.labels) != 0 {
		return false
	}
	col.from = int32(len(c.arena))
	c.arena = append(c.arena, '"')
	if mt.kind == enumKind {
		if n > 0 {
			c.arena = append(c.arena, mt.labels[n-1]...)
		}
	} else {
		first := true
		for i, l := range mt.labels {
			if n&(1<<i) == 0 {
				continue
			}
			if !first {
				c.arena = append(c.arena, ',')
			}
			c.arena, first = append(c.arena, l...), false
		}
	}
	c.arena = append(c.arena, '"')
	col.to = int32(len(c.arena))
	return true
}

type errorString string

func (e errorString) Error() string { return string(e) }

// overlay returns c.Before filled with c.Columns with the members of old
// laid over them, each typed by set: the row before an update, from
// Canal's and Maxwell's old (the previous values of the changed columns).
// With nullsLeftOut (Maxwell's), a member of old that data lacks is a
// column whose new value is NULL, which data leaves out (Maxwell's
// output_nulls=false: RowMap.writeMapToJSON skips data's nulls but writes
// old's), and its old value is added to the row before; otherwise (Canal
// writes every column in data) it is an error.
func (c *Change) overlay(old []byte, nullsLeftOut bool, set func(col *Column, v []byte) error) ([]Column, error) {
	before := append(c.Before[:0], c.Columns...)
	it, ok := open(old, '{')
	if !ok {
		return before, errorString("not a JSON object")
	}
	hint := 0
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		name := columnName(k)
		i := 0
		for i < len(before) && before[i].Name != string(name) {
			i++
		}
		if i == len(before) {
			if !nullsLeftOut {
				return before, errorString("column " + strconv.Quote(string(name)) + " is not in data")
			}
			before = append(before, Column{Name: c.Table.cols.intern(name, &hint)})
		}
		col := &before[i]
		*col = Column{Name: col.Name}
		if err := set(col, v); err != nil {
			return before, err
		}
	}
	return before, nil
}

// canalErase truncates, at pos, each table a DROP TABLE drops (an
// unqualified one in db, the statement's database). Canal's message names
// the first alone (DruidDdlParser.parse makes a DdlResult per table, and
// the entry's header takes the first), so the others are read from its
// statement. A DROP TEMPORARY TABLE drops a session's table, which may
// have the name of a table of the source, whose rows stay: no change.
func (d *Decoder) canalErase(dst []Change, db []byte, dropped [][2]string, temporary bool, pos Position, us int64) ([]Change, error) {
	if temporary {
		return dst, nil
	}
	// The message's database is the first table's (results.get(0)'s
	// schema name): the session's only where the statement does not
	// qualify that table. After `USE a`, `DROP TABLE b.t1, t2` comes as
	// database b, and t2 is a.t2: read in b, another table's model would
	// be emptied.
	if dropped[0][0] != "" && slices.ContainsFunc(dropped[1:], func(t [2]string) bool { return t[0] == "" }) {
		names := make([]string, len(dropped))
		for i, t := range dropped {
			names[i] = strings.TrimPrefix(t[0]+"."+t[1], ".")
		}
		return dst, d.errorf("a DROP TABLE of %s: its first table names its database and another names none, which is the session's database, not in Canal's message (its database is the first table's), "+
			"so no model is truncated; truncate the dropped tables' models (or check them with reconcile --source), then delete this dead letter", strings.Join(names, ", "))
	}
	for _, t := range dropped {
		tdb := []byte(t[0])
		if len(tdb) == 0 {
			tdb = db
		}
		table, err := d.router.route(tdb, nil, []byte(t[1]))
		if err != nil {
			return dst, routeError(err)
		}
		dst = truncation(dst, table, pos, us)
	}
	return dst, nil
}
