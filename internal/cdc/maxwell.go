package cdc

import (
	"bytes"
	"math"
	"slices"
	"strings"
)

func (d *Decoder) maxwell(dst []Change, key, value []byte) ([]Change, error) {
	var db, tbl, typ, ts, xoffset, commit, pos, data, old, pkCols, sql []byte
	it, _ := open(value, '{')
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		switch string(k) {
		case "database":
			db = text(v)
		case "table":
			tbl = text(v)
		case "type":
			typ = text(v)
		case "ts":
			ts = v
		case "xoffset":
			xoffset = v
		case "commit":
			commit = v
		case "position":
			pos = text(v)
		case "data":
			data = v
		case "old":
			old = v
		case "primary_key_columns":
			pkCols = v
		case "sql":
			sql = v
		}
	}
	if typ == nil {
		return dst, d.errorf("type is missing")
	}
	var o Op
	switch t := string(typ); {
	case t == "insert":
		o = Insert
	case t == "update":
		o = Update
	case t == "delete":
		o = Delete
	case t == "bootstrap-insert":
		o = Read
	case t == "bootstrap-start":
		o = SnapshotStart
	case t == "bootstrap-complete":
		o = SnapshotEnd
	case t == "table-drop":
		// A DROP TABLE (output_ddl: ResolvedTableDrop, DDLMap.toJSON):
		// the source table holds no row after it, so its model holds none
		// of the rows changed before it, as after Canal's ERASE; a table
		// created again under the name starts empty.
		o = Truncate
	case t == "table-create" && replaces(text(sql)):
		// MariaDB's CREATE OR REPLACE TABLE drops the table before it
		// creates it again: its model holds none of the rows before it,
		// as after a table-drop.
		o = Truncate
	case strings.HasPrefix(t, "table-"):
		o = SchemaChange
	case t == "database-drop":
		// A DROP DATABASE (ResolvedDatabaseDrop: its database alone): a
		// DROP TABLE of each of its tables. Its ts is in milliseconds, as
		// every DDL message's (see below).
		if db == nil {
			return dst, d.errorf("database-drop without its database")
		}
		return d.dropDatabase(dst, db, maxwellPosition(pos, xoffset, commit), millisToMicros(ts), nil)
	case strings.HasPrefix(t, "database-"):
		return dst, nil // DDL of a database: no table to route it to
	default:
		return dst, d.errorf("type %q is not one of insert, update, delete, bootstrap-insert, bootstrap-start, bootstrap-complete or table-…", typ)
	}
	if db == nil || tbl == nil {
		return dst, d.errorf("database or table is missing")
	}
	table, err := d.router.route(db, nil, tbl)
	if err != nil {
		return dst, routeError(err)
	}
	dst, c := next(dst)
	c.Op, c.Table = o, table
	if bytes.HasPrefix(typ, []byte("table-")) {
		// A DDL message's ts is in milliseconds (DDLMap.toJSON writes the
		// binlog event's header time, docs/dataformat.md's table-create
		// "ts":1477053126000), a row's in seconds (RowMap's
		// timestampSeconds): read as seconds, a drop's truncation was
		// 1000 times too late and moved its partition's reached time, which
		// the done marks go by, past every hour.
		c.SourceTime = millisToMicros(ts)
	} else {
		c.SourceTime, _ = mulExact(int64(uintOf(ts)), 1_000_000)
	}
	c.Position = maxwellPosition(pos, xoffset, commit)
	if !o.HasRow() {
		c.Statement = text(sql)
		return dst, nil
	}
	row, ok := open(data, '{')
	if !ok {
		return dst, d.errorf("%s of %s.%s: data is not a JSON object", typ, db, tbl)
	}
	hint := 0
	for k, v, ok := row.member(); ok; k, v, ok = row.member() {
		c.Columns = append(c.Columns, Column{Name: table.cols.intern(columnName(k), &hint)})
		c.infer(&c.Columns[len(c.Columns)-1], v)
	}
	if err := maxwellKey(c, pkCols, key); err != nil {
		return dst, d.errorf("%v", err)
	}
	if o == Update && !isNull(old) {
		if c.Before, err = c.overlay(old, true, func(col *Column, v []byte) error {
			c.infer(col, v)
			return nil
		}); err != nil {
			return dst, d.errorf("%s.%s: old: %v", db, tbl, err)
		}
	}
	c.settle(c.Columns)
	c.settle(c.Before)
	return dst, nil
}

// replaces says whether sql is a CREATE OR REPLACE TABLE (not of a
// temporary table).
func replaces(sql []byte) bool {
	_, _, ok := replacedTable(sql)
	return ok
}

// maxwellPosition is a message's position: its binlog position
// ("file:offset", with output_binlog_position), then its row in its
// transaction; the zero Position without one.
func maxwellPosition(pos, xoffset, commit []byte) Position {
	colon := bytes.LastIndexByte(pos, ':')
	if colon <= 0 {
		return Position{}
	}
	return position(binlogNumber(pos[:colon]), uintOf(pos[colon+1:]), rowInTransaction(xoffset, commit))
}

// rowInTransaction orders a row among its transaction's rows at one
// binlog position: Maxwell's xoffset, which it leaves out of the last row
// of a transaction (the one with "commit": true; RowMap.toJSON writes
// xoffset only when the row is not the commit), so that row sorts after
// every other (without output_xoffset every other row is 0).
func rowInTransaction(xoffset, commit []byte) uint64 {
	if xoffset == nil && string(commit) == "true" {
		return math.MaxUint64
	}
	return uintOf(xoffset)
}

// maxwellKey names the key columns (called once c.Columns holds the row's
// columns): primary_key_columns (Maxwell's output_primary_key_columns),
// or else the Kafka key Maxwell writes (RowIdentity.toKeyJson): with
// kafka_key_format=hash (the default) {"database":…,"table":…,"pk.id":…},
// whose pk. members are the key; with kafka_key_format=array
// [database, table, [{"id":…}, …]], one object per key column. Maxwell
// writes those names lower-cased ("pk." + pk.toLowerCase(), and
// pk.getKey().toLowerCase()) where the row keeps the column's own case, and
// MySQL's column names ignore case: each names the row's column it matches
// ignoring case.
func maxwellKey(c *Change, pkCols, key []byte) error {
	var names [][]byte
	if cols, ok := open(pkCols, '['); ok {
		for v, ok := cols.element(); ok; v, ok = cols.element() {
			names = append(names, text(v))
		}
		c.Table.keyNames(c, names)
		return nil
	}
	key = bytes.TrimSpace(key)
	if isNull(key) {
		return nil
	}
	if !validJSON(key) {
		return errorString("the key is not valid JSON")
	}
	if it, ok := open(key, '{'); ok {
		for k, _, ok := it.member(); ok; k, _, ok = it.member() {
			if name, isPK := bytes.CutPrefix(columnName(k), []byte("pk.")); isPK {
				names = append(names, name)
			}
		}
	} else if it, ok := open(key, '['); ok {
		var err error
		if names, err = arrayKeyNames(it); err != nil {
			return err
		}
	} else {
		return nil // a custom key: no names
	}
	for i, name := range names {
		if j := slices.IndexFunc(c.Columns, func(col Column) bool { return strings.EqualFold(col.Name, string(name)) }); j >= 0 {
			names[i] = []byte(c.Columns[j].Name)
		}
	}
	c.Table.keyNames(c, names)
	return nil
}

// arrayKeyNames reads the key columns' names of Maxwell's array key,
// [database, table, [{"id":1}, {"part2":"x"}]] (it: the outer array
// opened): none for [] (a table without a primary key).
func arrayKeyNames(it iter) ([][]byte, error) {
	var pks []byte
	n := 0
	for v, ok := it.element(); ok; v, ok = it.element() {
		if n == 2 {
			pks = v
		}
		n++
	}
	cols, ok := open(pks, '[')
	if n != 3 || !ok {
		return nil, errorString("the key is an array but not Maxwell's kafka_key_format=array, [database, table, [{column: value}, …]]: it names no key columns")
	}
	var names [][]byte
	for v, ok := cols.element(); ok; v, ok = cols.element() {
		col, isObject := open(v, '{')
		k, _, more := col.member()
		if !isObject || !more {
			return nil, errorString("the key is an array but not Maxwell's kafka_key_format=array, [database, table, [{column: value}, …]]: it names no key columns")
		}
		names = append(names, columnName(k))
	}
	return names, nil
}
