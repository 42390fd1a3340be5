package cdc

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tracelake/tracelake/internal/schema"
)

// field is a column's type in Debezium's schema wrapper: an element of
// schema.fields[after].fields.
type field struct {
	name, typ, logical []byte
	scale, precision   int
	// hasScale: the parameters give the scale, an integer (a Decimal's
	// bytes are no number without it).
	hasScale bool
	// itemLogical and itemScale are an array's items' logical type and
	// scale (schema.fields[after].fields[i].items), itemHasScale
	// hasScale's of the items.
	itemLogical  []byte
	itemScale    int
	itemHasScale bool
	// bits is a Bits field's length parameter, its number of bits (0 for
	// another field).
	bits int
	// def is the column's default as the schema gives it ("default":
	// Kafka Connect's JsonConverter writes a field's default value, which
	// Debezium sets from the column's DEFAULT), nil for none.
	def []byte
}

// conversion is how a Debezium value becomes its NDJSON.
type conversion uint8

const (
	asIs                 conversion = iota
	fromDecimal                     // base64 big-endian unscaled bytes, scale parameter
	fromVarDecimal                  // {"scale":s,"value":base64}
	fromDays                        // days since the epoch
	fromMillis                      // ms (since the epoch, or of the day)
	fromNanos                       // ns
	fromISO                         // ISO-8601 text with zone
	fromISODate                     // ISO-8601 date, UTC: 2017-09-15Z
	fromISOLocal                    // ISO-8601 date and time, UTC: 2019-07-09T02:28:57.123456Z
	fromISOTime                     // ISO-8601 time of day, UTC: 04:05:11.789Z
	fromJSONText                    // a string holding JSON
	fromMySQLTextVariant            // not used by Debezium: see canal.go
)

type logicalType struct {
	typ  schema.Type
	conv conversion
	// infinity is what Debezium writes for PostgreSQL's infinity and
	// -infinity in this type (JSON text), nil for a type that has none.
	infinity *[2]string
}

// The values Debezium's PostgreSQL connector writes for infinity and
// -infinity (PostgresValueConverter: POSITIVE_INFINITY_* and
// NEGATIVE_INFINITY_*, the connector's documentation, "TIMESTAMP type" and
// time.precision.mode=nanoseconds; the expected values of
// AbstractRecordsProducerTest and PostgresTemporalPrecisionHandlingIT),
// by logical type. A timestamp's are pgjdbc's PGStatement.DATE_POSITIVE_INFINITY
// and DATE_NEGATIVE_INFINITY µs (294247-01-10T04:00:25.2 and
// -290308-12-21T19:59:27.6), in the type's unit; a NanoTimestamp's int64's
// bounds; a date's the epoch days of LocalDate -5877611-06-21 and
// -5877611-06-22 (DateTimeFormat.date, the pgoutput text "infinity");
// a ZonedTimestamp's PostgreSQL's own text. Each is out of the range of
// every other source's dates (MySQL's end in 9999); a PostgreSQL
// timestamp of exactly 294247-01-10T04:00:25.2 is read as infinity, as
// Debezium gives the two alike.
var (
	microInfinity  = &[2]string{"9223372036825200000", "-9223372036832400000"}
	milliInfinity  = &[2]string{"9223372036825200", "-9223372036832400"}
	nanoInfinity   = &[2]string{"9223372036854775807", "-9223372036854775808"}
	dayInfinity    = &[2]string{"-2147472692", "-2147472691"}
	zonedInfinity  = &[2]string{`"infinity"`, `"-infinity"`}
	isoInfinity    = &[2]string{`"+294247-01-10T04:00:25.2Z"`, `"-290308-12-21T19:59:27.6Z"`}
	isoDayInfinity = &[2]string{`"-5877611-06-21Z"`, `"-5877611-06-22Z"`}
)

// logicalTypes are the Debezium and Kafka Connect logical types (schema
// name) decoded; others (io.debezium.data.Enum, Uuid, Bits…) are read by
// their schema type. A date is a Timestamp at its midnight, UTC.
var logicalTypes = map[string]logicalType{
	"org.apache.kafka.connect.data.Decimal":   {schema.Decimal, fromDecimal, nil},
	"io.debezium.data.VariableScaleDecimal":   {schema.Decimal, fromVarDecimal, nil},
	"io.debezium.time.Date":                   {schema.Timestamp, fromDays, dayInfinity},
	"org.apache.kafka.connect.data.Date":      {schema.Timestamp, fromDays, dayInfinity},
	"io.debezium.time.Timestamp":              {schema.Timestamp, fromMillis, milliInfinity},
	"org.apache.kafka.connect.data.Timestamp": {schema.Timestamp, fromMillis, milliInfinity},
	"io.debezium.time.MicroTimestamp":         {schema.Timestamp, asIs, microInfinity},
	"io.debezium.time.NanoTimestamp":          {schema.Timestamp, fromNanos, nanoInfinity},
	"io.debezium.time.ZonedTimestamp":         {schema.Timestamp, fromISO, zonedInfinity},
	// time.precision.mode=isostring: UTC ISO-8601 text (IsoDate,
	// IsoTimestamp and IsoTime: java.time's ISO_OFFSET_DATE,
	// ISO_OFFSET_DATE_TIME and ISO_OFFSET_TIME at ZoneOffset.UTC).
	"io.debezium.time.IsoDate":      {schema.Timestamp, fromISODate, isoDayInfinity},
	"io.debezium.time.IsoTimestamp": {schema.Timestamp, fromISOLocal, isoInfinity},
	"io.debezium.time.IsoTime":      {schema.Int64, fromISOTime, nil},
	// A time of day is an Int64 of µs: MySQL's TIME spans ±838 hours,
	// which no time-of-day type holds.
	"io.debezium.time.Time":              {schema.Int64, fromMillis, nil},
	"org.apache.kafka.connect.data.Time": {schema.Int64, fromMillis, nil},
	"io.debezium.time.MicroTime":         {schema.Int64, asIs, nil},
	"io.debezium.time.NanoTime":          {schema.Int64, fromNanos, nil},
	"io.debezium.data.Json":              {schema.JSON, fromJSONText, nil},
	"io.debezium.time.Year":              {schema.Int32, asIs, nil},
}

// infinite says whether v is Debezium's value of PostgreSQL's infinity or
// -infinity in lt, and which as a Timestamp value.
func (lt logicalType) infinite(v []byte) (int64, bool) {
	switch {
	case lt.infinity == nil:
	case string(v) == lt.infinity[0]:
		return schema.TimestampInfinity, true
	case string(v) == lt.infinity[1]:
		return schema.TimestampNegativeInfinity, true
	}
	return 0, false
}

// micros reads v (not null, not an infinity), a value of lt, a time type,
// as µs: since the epoch (a Timestamp), or since midnight (an Int64 time of
// day); zero is true for MySQL's zero date, which is no instant. False
// when v is not a value of lt, or overflows.
func (lt logicalType) micros(v []byte) (us int64, zero, ok bool) {
	switch lt.conv {
	case fromISO, fromISODate, fromISOLocal:
		return parseDateTime(text(v))
	case fromISOTime:
		us, ok := parseISOTime(text(v))
		return us, false, ok
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, false, false
	}
	us, ok = toMicros(lt.conv, n)
	return us, false, ok
}

// connectTypes are Kafka Connect's schema types, by the names its
// JsonConverter writes (connect/json JsonSchema): FLOAT32 and FLOAT64 are
// "float" and "double" there, not Schema.Type's names float32 and float64,
// which are kept for a schema written otherwise. Read as an unknown type,
// a string, every change with a number in such a column was dead-lettered.
// Bytes stay the base64 text the JsonConverter writes.
var connectTypes = map[string]schema.Type{
	"int8": schema.Int32, "int16": schema.Int32, "int32": schema.Int32, "int64": schema.Int64,
	"float": schema.Float64, "double": schema.Float64,
	"float32": schema.Float64, "float64": schema.Float64, "boolean": schema.Bool,
	"string": schema.String, "bytes": schema.String,
	"struct": schema.JSON, "array": schema.JSON, "map": schema.JSON,
}

// heartbeatTopicPrefix begins the name of Debezium's heartbeat topics by
// default (topic.heartbeat.prefix; HeartbeatImpl.DEFAULT_HEARTBEAT_TOPICS_PREFIX).
const heartbeatTopicPrefix = "__debezium-heartbeat"

// heartbeatSchema is the name of a heartbeat message's value schema
// (SchemaFactory.heartbeatValueSchema), which Debezium matches by suffix
// (isHeartBeatSchema: a schema name adjuster may change what comes before).
const heartbeatSchema = "io.debezium.connector.common.Heartbeat"

// isHeartbeat says whether a message without op is a Debezium heartbeat
// by its shape, whatever its topic (topic.heartbeat.prefix sets any
// prefix): its value schema, or, without schemas, a payload whose only
// member is ts_ms, an integer (HeartbeatImpl.messageValue) — no event of
// the connector's other topics is that alone.
func isHeartbeat(envSchema []byte, members int, tsMs []byte) bool {
	if name := text(member(envSchema, "name")); name != nil {
		return bytes.HasSuffix(name, []byte(heartbeatSchema))
	}
	return members == 1 && isInteger(tsMs)
}

// transactionMembers are the members of Debezium's transaction metadata
// messages (debezium-core AbstractTransactionStructMaker's
// buildBeginTransactionValue / buildEndTransactionValue).
var transactionMembers = []string{"status", "id", "ts_ms", "event_count", "data_collections"}

func (d *Decoder) debezium(dst []Change, topic string, key, value []byte) ([]Change, error) {
	envSchema, payload, wrapped := connectEnvelope(value)
	if !wrapped {
		payload, envSchema = value, nil
	} else if isNull(payload) {
		return d.debeziumTombstone(dst, topic, key) // with the schema wrapper
	}
	var before, after, source, op, tsMs, ddl, tableChanges, status []byte
	it, ok := open(payload, '{')
	if !ok {
		return dst, d.errorf("payload is not a JSON object")
	}
	// others: members transaction metadata has not; txMembers: those it
	// has, of which a transaction message holds every one.
	members, others, txMembers := 0, 0, 0
	flat := false // a member only a flattened row has
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		members++
		switch string(k) {
		case flatPrefix + "op", flatPrefix + "deleted":
			flat = true
		case "before":
			before = v
		case "after":
			after = v
		case "source":
			source = v
		case "op":
			op = v
		case "ts_ms":
			tsMs = v
		case "ddl":
			ddl = v
		case "tableChanges":
			tableChanges = v
		case "status":
			status = text(v)
		}
		if slices.Contains(transactionMembers, string(k)) {
			txMembers++
		} else {
			others++
		}
	}
	if flat || isFlattenedSchema(envSchema) {
		// Before the tests of a message without op: a row's columns may
		// be called ddl, or id and status. Its schema's name is what
		// tells it, not its members: a row of an audit table has
		// columns op, before and after, and was taken for a change
		// event whose images were those columns' strings.
		return d.debeziumFlat(dst, topic, key, payload, envSchema)
	}
	if op == nil {
		switch {
		case strings.HasPrefix(topic, heartbeatTopicPrefix) || isHeartbeat(envSchema, members, tsMs):
			return dst, nil // a heartbeat: only time passing
		case ddl != nil || tableChanges != nil:
			// The connector's schema change topic (named as the server,
			// topic.prefix): DDL. A table's columns come from its change
			// events' own schemas and rows, as they change; a DROP TABLE
			// empties its model.
			return d.debeziumSchemaChange(dst, payload, source, tableChanges)
		case (string(status) == "BEGIN" || string(status) == "END") && others == 0 && txMembers >= len(transactionMembers)-1:
			// Transaction metadata (provide.transaction.metadata, the
			// <server>.transaction topic): no row. Known by all its
			// members, not its status alone: a row of a table with a
			// status column, flattened (ExtractNewRecordState, no op),
			// was skipped as one, where the others are dead-lettered.
			// All of them, or all but one (an older Debezium's
			// messages may lack ts_ms): the JsonConverter writes each
			// field of the struct, a BEGIN's null event_count and
			// data_collections too, and a flattened row of columns id
			// and status was skipped.
			return dst, nil
		}
		if before == nil && after == nil && source == nil {
			// No envelope at all: a row flattened without schemas
			// and without the fields that tell it from any JSON.
			return dst, d.errorf("op is missing, and before, after and source too: a row Debezium's ExtractNewRecordState flattened without schemas is known by its %sop or %sdeleted field (set add.fields=op)", flatPrefix, flatPrefix)
		}
		return dst, d.errorf("op is missing")
	}
	o, err := d.debeziumOp(op)
	if err != nil || o == 0 {
		return dst, err
	}
	fp := d.fieldList()
	defer d.fields.Put(fp)
	*fp = rowFields((*fp)[:0], envSchema)
	return d.debeziumChange(dst, topic, key, o, readSource(source), tsMs, before, after, *fp, false)
}

// debeziumOp reads a change's op: 0 for a PostgreSQL logical-decoding
// message ("m"), which is no table's row.
func (d *Decoder) debeziumOp(op []byte) (Op, error) {
	switch string(text(op)) {
	case "c":
		return Insert, nil
	case "u":
		return Update, nil
	case "d":
		return Delete, nil
	case "r":
		return Read, nil
	case "t":
		return Truncate, nil
	case "m":
		return 0, nil
	}
	return 0, d.errorf("op %s is not one of c, u, d, r, t", clip(op))
}

// debeziumChange appends the change o of the row images before and after
// (a delete's row is before) from source src, typed by fields (nil
// without schema); flat says they are a flattened row, whose metadata
// members are no columns.
func (d *Decoder) debeziumChange(dst []Change, topic string, key []byte, o Op, src source, tsMs, before, after []byte, fields []field, flat bool) ([]Change, error) {
	if src.db == nil || src.table == nil {
		// Without source (an SMT removed it): the topic server.db.table.
		parts := strings.Split(topic, ".")
		if len(parts) < 3 {
			return dst, d.errorf("neither source.db and source.table nor the topic %q (server.database.table) name the table", topic)
		}
		src.db, src.table = []byte(parts[len(parts)-2]), []byte(parts[len(parts)-1])
	}
	table, err := d.router.route(src.db, src.schema, src.table)
	if err != nil {
		return dst, routeError(err)
	}
	table.sawServer(src.server)
	dst, c := next(dst)
	c.Op, c.Table, c.Position = o, table, src.position
	c.SourceTime = src.timeUs
	if c.SourceTime == 0 {
		c.SourceTime = millisToMicros(tsMs)
	}
	if err := d.debeziumKey(c, key); err != nil {
		return dst, err
	}
	ph := d.placeholderOf(src)
	row := after
	switch o {
	case Delete:
		row = before
	case Truncate:
		return dst, nil
	case Update:
		if !isNull(before) {
			if c.Before, err = d.debeziumRow(c, c.Before, before, fields, ph, flat); err != nil {
				return dst, err
			}
		}
	}
	if isNull(row) {
		img := "after"
		if o == Delete {
			img = "before"
		}
		return dst, d.errorf("op \"%c\" without the %s image", o.Letter(), img)
	}
	if c.Columns, err = d.debeziumRow(c, c.Columns, row, fields, ph, flat); err != nil {
		return dst, err
	}
	c.keepRowKeys()
	table.sawKey(c.Key)
	c.settle(c.Columns)
	c.settle(c.Before)
	return dst, nil
}

// debeziumTombstone decodes a Kafka tombstone, the key and a null value
// Debezium sends after each delete so that log compaction can drop the
// key's records: a delete of its key, without a position (the merge orders
// it by Kafka order after the changes of its key before it in its
// partition, where Debezium puts every change of a key). Once compacted, a
// topic can hold it without its delete, and a consumer behind the log
// cleaner that loaded the row before reads only the tombstone. Its table
// is the one its key's schema (server.database.table.Key) or else its
// topic (server.database.table, or server.schema.table) names, if this
// decoder knows that table (has seen its changes, or an earlier process
// has: Claim) and it is of that server: a topic of many tables names
// none of them, and its tombstones change nothing, as a key that is no
// object of columns does not, or one not the key of the table's changes.
func (d *Decoder) debeziumTombstone(dst []Change, topic string, key []byte) ([]Change, error) {
	key = bytes.TrimSpace(key)
	if isNull(key) || !validJSON(key) {
		return dst, nil
	}
	name, row := topic, key
	keySchema, payload, wrapped := connectEnvelope(key)
	if wrapped {
		row = payload
		if n, ok := strings.CutSuffix(string(text(member(keySchema, "name"))), ".Key"); ok {
			name = n
		}
	}
	if _, ok := open(row, '{'); !ok {
		return dst, nil
	}
	table := d.router.named(name)
	if table == nil {
		return dst, nil
	}
	n := len(dst)
	dst, c := next(dst)
	c.Op, c.Table = Delete, table
	if err := d.debeziumKey(c, key); err != nil {
		return dst[:n], err
	}
	if !table.keyedBy(c.Key) {
		// Another producer's tombstone on the topic, or a key with a
		// routing transform's field: a delete of a key the table has
		// not would grow its changelog table and, the model's key
		// changing, stop its merges for good.
		return dst[:n], nil
	}
	var err error
	if c.Columns, err = d.debeziumRow(c, c.Columns, row, structFields(nil, keySchema), &d.unavailable, false); err != nil {
		return dst[:n], err
	}
	c.settle(c.Columns)
	return dst, nil
}

func (d *Decoder) fieldList() *[]field {
	if p, ok := d.fields.Get().(*[]field); ok {
		return p
	}
	return new([]field)
}

// source is what Debezium's source block says of a change.
type source struct {
	db, schema, table []byte
	server            []byte // source.name: the connector's server (topic.prefix)
	position          Position
	timeUs            int64
	// binlog: the change is a MySQL or MariaDB connector's (a binlog
	// file), which reads every value from the row image and never
	// writes the placeholder for a value it did not read.
	binlog bool
}

func readSource(v []byte) source {
	var f sourceFields
	it, _ := open(v, '{')
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		f.set(k, v)
	}
	return f.source()
}

// sourceFields gathers the fields of a source block that say where a
// change is from, by their names there.
type sourceFields struct {
	s                                    source
	file, pos, lsn, sequence, tsMs, tsUs []byte
}

// set takes source field k's value v.
func (f *sourceFields) set(k, v []byte) {
	switch string(k) {
	case "db":
		f.s.db = text(v)
	case "name":
		f.s.server = text(v)
	case "schema":
		f.s.schema = text(v)
	case "table":
		f.s.table = text(v)
	case "file":
		f.file = text(v)
	case "pos":
		f.pos = v
	case "lsn":
		f.lsn = v
	case "sequence":
		f.sequence = text(v)
	case "ts_ms":
		f.tsMs = v
	case "ts_us":
		f.tsUs = v
	}
}

// source is what the fields set say of the change: its table, server,
// position and time.
func (f *sourceFields) source() source {
	s := f.s
	switch {
	case !isNull(f.lsn):
		s.position = postgresPosition(f.lsn, f.sequence)
	case f.file != nil:
		s.position = position(binlogNumber(f.file), uintOf(f.pos))
		s.binlog = true
	}
	s.timeUs = millisToMicros(f.tsMs)
	if us, err := strconv.ParseInt(string(f.tsUs), 10, 64); err == nil {
		s.timeUs = us
	}
	return s
}

// flatPrefix begins the name of each field ExtractNewRecordState adds to
// a row it flattens (add.fields.prefix's default, METADATA_FIELD_PREFIX).
const flatPrefix = "__"

// flatMetadata are the fields, after flatPrefix, that
// ExtractNewRecordState's add.fields can add to a flattened row: the
// envelope's (op, ts_ms…) and its transaction block's (id, total_order,
// data_collection_order), deleted in rewrite mode, and the source block's
// of the MySQL, PostgreSQL, SQL Server and Oracle connectors (their
// SourceInfo structs). A field of the source block can also be named with
// its struct, source_<field>. None is a column of the row.
var flatMetadata = []string{
	"op", "deleted", "ts_ms", "ts_us", "ts_ns", "id", "total_order", "data_collection_order",
	"version", "connector", "name", "snapshot", "db", "sequence", "schema", "table",
	"txId", "lsn", "xmin", "file", "pos", "gtid", "row", "thread", "query", "server_id",
	"change_lsn", "commit_lsn", "event_serial_no", "scn", "commit_scn", "rs_id", "ssn",
	"redo_thread", "user_name", "row_id",
}

// isFlatMetadata says whether the member k of a flattened row is a field
// ExtractNewRecordState added, not a column.
func isFlatMetadata(k []byte) bool {
	name, ok := bytes.CutPrefix(k, []byte(flatPrefix))
	if !ok {
		return false
	}
	return bytes.HasPrefix(name, []byte("source_")) || slices.Contains(flatMetadata, string(name))
}

// isFlattenedSchema says whether a record's value schema is a row's, the
// one ExtractNewRecordState leaves a change it flattens (the after
// field's, <server>.<database>.<table>.Value), where a change event's is
// its envelope's (….Envelope) and Debezium's other messages' their own
// (io.debezium.connector.common.Heartbeat, ….SchemaChangeValue,
// ….TransactionMetadataValue).
func isFlattenedSchema(envSchema []byte) bool {
	return bytes.HasSuffix(text(member(envSchema, "name")), []byte(".Value"))
}

// debeziumFlat decodes a row ExtractNewRecordState flattened: its op is
// the added __op (c, u, d, r), else a delete where __deleted is "true"
// (delete.tombstone.handling.mode rewrite: the row is the before image),
// else an update (an upsert of its key, as an insert and a read are);
// where it is from is the source fields add.fields added (__db, __table,
// __lsn, __file, __pos, __source_ts_ms…), else its topic; without a
// position its key's changes go by Kafka order. Its schema, if any, is
// the row's.
func (d *Decoder) debeziumFlat(dst []Change, topic string, key, row, rowSchema []byte) ([]Change, error) {
	it, ok := open(row, '{')
	if !ok {
		return dst, d.errorf("a flattened row is not a JSON object")
	}
	var f sourceFields
	var op, tsMs []byte
	deleted := false
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		name, ok := bytes.CutPrefix(k, []byte(flatPrefix))
		if !ok {
			continue
		}
		switch string(name) {
		case "op":
			op = v
		case "deleted":
			deleted = string(text(v)) == "true"
		case "ts_ms":
			tsMs = v // the envelope's: when the connector made the change
		default:
			if field, ok := bytes.CutPrefix(name, []byte("source_")); ok {
				name = field
			}
			f.set(name, v)
		}
	}
	o := Update
	if op != nil {
		var err error
		if o, err = d.debeziumOp(op); err != nil || o == 0 {
			return dst, err
		}
	}
	if deleted {
		o = Delete
	}
	before, after := []byte(nil), row
	if o == Delete {
		before, after = row, nil
	}
	src := f.source()
	if src.db != nil && src.table != nil && src.schema == nil && !src.binlog {
		// A binlog position (__file) is a MySQL or MariaDB connector's,
		// whose tables have no schema whatever the topic says.
		// The value schema's name first, as the connector named it (a
		// RegexRouter renames the topic, not the schema), when it ends
		// in the table's (an adjusted name, my_orders for my-orders,
		// does not).
		postgres, placed := !isNull(f.lsn), false
		if n, ok := bytes.CutSuffix(text(member(rowSchema, "name")), []byte(".Value")); ok {
			src.schema, placed = topicSchema(string(n), src.db, src.table, postgres)
		}
		if !placed {
			src.schema, _ = topicSchema(topic, src.db, src.table, postgres)
		}
	}
	fp := d.fieldList()
	defer d.fields.Put(fp)
	*fp = structFields((*fp)[:0], rowSchema)
	return d.debeziumChange(dst, topic, key, o, src, tsMs, before, after, *fp, true)
}

// topicSchema is the schema a flattened row's topic names beside its
// added __db and __table, nil for none, and whether the topic ends in
// the table (else it says nothing of it): add.fields=db,table (the SMT's
// documented example) adds no __schema, and a PostgreSQL or SQL Server
// connector's topic is <server>.[<database>.]<schema>.<table>, a MySQL
// one's <server>.<database>.<table>, whose part before the table is the
// database. Routed without its schema, the row's table was not its
// connector's unflattened changes' (source.schema), and tables of one
// name in two schemas of the database were one. The caller passes the
// value schema's name for the topic first where the row has one
// (<topic>.Value as the connector named it: mysql.cdc.orders, a topic a
// RegexRouter renamed, said schema cdc of a MySQL table), and postgres
// where the row's position is a PostgreSQL connector's (__lsn):
// the part before the table is its schema even when the database is
// called alike. The table is cut off whole: its name may hold a dot
// (v1.orders in srv.public.v1.orders).
func topicSchema(topic string, db, table []byte, postgres bool) ([]byte, bool) {
	rest, ok := strings.CutSuffix(topic, "."+string(table))
	if !ok {
		return nil, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || i == len(rest)-1 || rest[i+1:] == string(db) && !postgres {
		// Not <server>.<schema>.<table>: the server's name alone before
		// the table, or a MySQL database.
		return nil, true
	}
	return []byte(rest[i+1:]), true
}

// postgresPosition is a Debezium PostgreSQL change's position: (last
// commit LSN, lsn) from sequence, the JSON array of strings
// ["lastCommitLsn","lsn"] (SourceInfo.sequence in
// debezium-connector-postgres; lastCommitLsn is null until the connector
// has seen a commit since its offsets began, PostgresOffsetContext.
// initialContext), or (lsn) without one.
//
// The connector decodes transactions in commit order, and lsn is where a
// change was written, which for the changes of two transactions is not
// that order: an incremental snapshot's rows carry the position at which
// the stream reached the chunk's high watermark
// (AbstractIncrementalSnapshotChangeEventSource.closeWindow), and a
// transaction that changed a row of the chunk before it was read and
// commits after the high watermark comes after it, with a lower lsn. The
// last commit LSN, updated at each commit (PostgresStreamingChangeEventSource.
// commitMessage), puts it after. Without one (null) the first part is lsn,
// which orders the changes of one row as before: a row's lock holds a
// later change until the earlier one commits.
//
// The position leads with max(last commit, lsn): (max, last commit, lsn).
// A position stored by a release before 2026-12-06, or of a connector
// without sequence, is (lsn) alone, and a transaction's changes can
// straddle the upgrade (the loader stopped between them): its later
// change of a row, (last commit, lsn) with the commit before the
// transaction's below the earlier change's lsn, sorted before the stored
// one and was dropped for a resend, the model keeping the earlier value
// for good. Led by the max, it sorts after: its lsn is above the earlier
// change's. Among new positions the max orders as (last commit, lsn) did:
// a transaction's changes share the last commit and go by lsn, and each
// change of a later-committed transaction has a last commit at or past
// the end of every earlier one, above all of that one's parts.
func postgresPosition(lsn, sequence []byte) Position {
	at := uintOf(lsn)
	it, ok := open(sequence, '[')
	if !ok {
		return position(at)
	}
	commit, _ := it.element()
	if isNull(commit) {
		return position(at, at, at)
	}
	c, err := strconv.ParseUint(string(text(commit)), 10, 64)
	if err != nil {
		return position(at)
	}
	return position(max(c, at), c, at)
}

func uintOf(v []byte) uint64 {
	n, _ := strconv.ParseUint(string(v), 10, 64)
	return n
}

func millisToMicros(v []byte) int64 {
	ms, _ := strconv.ParseInt(string(v), 10, 64)
	us, _ := mulExact(ms, usPerMs)
	return us
}

// binlogNumber is the sequence number of a binlog file: 3 for
// mysql-bin.000003.
func binlogNumber(file []byte) uint64 {
	dot := bytes.LastIndexByte(file, '.')
	return uintOf(file[dot+1:])
}

// debeziumKey names the key columns from the record key: its schema's
// fields, or else its members.
func (d *Decoder) debeziumKey(c *Change, key []byte) error {
	key = bytes.TrimSpace(key)
	if isNull(key) {
		return nil // a table without a primary key
	}
	if !validJSON(key) {
		return d.errorf("the key is not valid JSON")
	}
	var names [][]byte
	if _, ok := open(key, '{'); !ok {
		return nil // a key of one value (an SMT's): no column names
	}
	keySchema, payload, wrapped := connectEnvelope(key)
	if wrapped {
		for _, f := range structFields(nil, keySchema) {
			names = append(names, f.name)
		}
		if names == nil {
			key = payload
		}
	}
	if names == nil {
		it, _ := open(key, '{')
		for k, _, ok := it.member(); ok; k, _, ok = it.member() {
			names = append(names, columnName(k))
		}
	}
	c.Table.keyNames(c, names)
	return nil
}

// keepRowKeys drops from c.Key the names that are no column of the row
// (c.Columns): the field Debezium's ByLogicalTableRouter and
// ToLogicalTopicRouter add to the key of every table they send to one
// topic, with key.enforce.uniqueness (the default), naming the physical
// table (key.field.name: __dbz__physicalTableIdentifier, or
// __dbz__sourceIdentifier for ToLogicalTopicRouter, or the operator's;
// ToLogicalTopicRouter.updateKeySchema in debezium-connect-plugins). The
// table's key is its own key columns, which every row image holds (each
// of the row's fields is written, null or not); a name outside the row
// would make the model's key a column it has not.
func (c *Change) keepRowKeys() {
	keep := c.Key[:0]
	for _, k := range c.Key {
		if slices.ContainsFunc(c.Columns, func(col Column) bool { return col.Name == k }) {
			keep = append(keep, k)
		}
	}
	clear(c.Key[len(keep):])
	c.Key = keep
}

// connectEnvelope reads the JsonConverter's wrapper of a value with its
// schema (schemas.enable=true): an object of exactly the members schema
// (a Connect schema, an object, or null) and payload. A key without the
// wrapper is the key columns' object, which may hold a column named
// payload or schema (a primary key (payload) is {"payload":5}): taken for
// the wrapper, its columns would be lost.
func connectEnvelope(v []byte) (connectSchema, payload []byte, ok bool) {
	it, isObject := open(v, '{')
	n := 0
	for k, v, more := it.member(); isObject && more; k, v, more = it.member() {
		n++
		switch string(k) {
		case "schema":
			connectSchema = v
		case "payload":
			payload, ok = v, true
		}
	}
	if n != 2 || connectSchema == nil || !isNull(connectSchema) && connectSchema[0] != '{' {
		return nil, nil, false
	}
	return connectSchema, payload, ok
}

// rowFields appends the fields of the row struct in an envelope's schema
// (the after field's, or the before field's): nil without schema.
func rowFields(dst []field, envSchema []byte) []field {
	els, ok := open(member(envSchema, "fields"), '[')
	for v, more := els.element(); ok && more; v, more = els.element() {
		if name := string(text(member(v, "field"))); name == "after" || name == "before" {
			if out := structFields(dst, v); len(out) > len(dst) {
				return out
			}
		}
	}
	return dst
}

// structFields appends the fields of a struct schema.
func structFields(dst []field, structSchema []byte) []field {
	els, ok := open(member(structSchema, "fields"), '[')
	for v, more := els.element(); ok && more; v, more = els.element() {
		dst = append(dst, readField(v))
	}
	return dst
}

// readField reads one field of a struct schema.
func readField(v []byte) field {
	var f field
	m, _ := open(v, '{')
	for k, v, ok := m.member(); ok; k, v, ok = m.member() {
		switch string(k) {
		case "field":
			f.name = text(v)
		case "type":
			f.typ = text(v)
		case "name":
			f.logical = text(v)
		case "parameters":
			f.scale, f.precision, f.hasScale = decimalParameters(v)
			f.bits, _ = strconv.Atoi(string(text(member(v, "length"))))
		case "default":
			if !isNull(v) {
				f.def = v
			}
		case "items":
			it, _ := open(v, '{')
			for k, v, ok := it.member(); ok; k, v, ok = it.member() {
				switch string(k) {
				case "name":
					f.itemLogical = text(v)
				case "parameters":
					f.itemScale, _, f.itemHasScale = decimalParameters(v)
				}
			}
		}
	}
	return f
}

// decimalParameters reads a Decimal's scale and precision from a schema's
// parameters (strings: {"scale":"2","connect.decimal.precision":"10"});
// hasScale is false when they give no scale that is an integer.
func decimalParameters(v []byte) (scale, precision int, hasScale bool) {
	p, _ := open(v, '{')
	for k, v, ok := p.member(); ok; k, v, ok = p.member() {
		switch string(k) {
		case "scale":
			var err error
			scale, err = strconv.Atoi(string(text(v)))
			hasScale = err == nil
		case "connect.decimal.precision":
			precision, _ = strconv.Atoi(string(text(v)))
		}
	}
	return scale, precision, hasScale
}

// placeholderOf is the placeholder for a value the connector of a change
// with source src did not read, nil for a connector that never writes
// one (MySQL's and MariaDB's: a text of a column that equals it is a
// value a user wrote, and read as unread the model would keep the
// column's earlier value).
func (d *Decoder) placeholderOf(src source) *placeholder {
	if src.binlog {
		return nil
	}
	return &d.unavailable
}

// debeziumRow appends the columns of a row image: typed by fields where
// the schema has the column, else inferred. A value that is ph's (nil
// for none) is one the connector did not read. flat says the row is one
// ExtractNewRecordState flattened, whose added fields are no columns.
func (d *Decoder) debeziumRow(c *Change, cols []Column, row []byte, fields []field, ph *placeholder, flat bool) ([]Column, error) {
	it, ok := open(row, '{')
	if !ok {
		return cols, d.errorf("a row image is not a JSON object")
	}
	nameHint, typeHint, defaultHint := 0, 0, 0
	for i := 0; ; i++ {
		k, v, ok := it.member()
		if !ok {
			return cols, nil
		}
		if flat && isFlatMetadata(k) {
			continue
		}
		name := columnName(k)
		unread := ph != nil && ph.is(v)
		if unread {
			if err := d.unreadError(c, name); err != nil {
				return cols, err
			}
			v = jsonNull // typed as a null of its field, marked below
		}
		cols = append(cols, Column{Name: c.Table.cols.intern(name, &nameHint), Unavailable: unread})
		col := &cols[len(cols)-1]
		f := findField(fields, name, i)
		if f == nil {
			c.infer(col, v)
			continue
		}
		sourceType := f.logical
		if sourceType == nil {
			sourceType = f.typ
		}
		col.SourceType = c.Table.types.intern(sourceType, &typeHint)
		if err := c.debeziumValue(col, f, v); err != nil {
			return cols, d.errorf("column %q: %v", name, err)
		}
		if f.def != nil {
			col.Default = c.defaultOf(f, &defaultHint)
		}
	}
}

// jsonNull is JSON's null.
var jsonNull = []byte("null")

// unreadError is the error of column name of c holding Debezium's
// placeholder for a value it did not read, nil where the placeholder
// can stand for a value an earlier change gave: a column of an update,
// left unchanged; of a create, which the PostgreSQL connector writes
// for an update that changed the row's primary key (a delete of the old
// key and a create of the new, at the update's position: the merge
// takes the old key's value); or of a delete's before image, of which
// the model reads the key alone. A snapshot read selects every value,
// and a key column says which row the change is of.
func (d *Decoder) unreadError(c *Change, name []byte) error {
	why := ""
	switch {
	case slices.Contains(c.Key, string(name)):
		why = "it is a key column, which says which row the change is of"
	case c.Op == Read:
		why = "a snapshot read (op r) selects every value, and no earlier change gives it"
	default:
		return nil
	}
	return &Error{Reason: fmt.Sprintf("column %q holds Debezium's placeholder for a value it did not read (%s: with PostgreSQL's REPLICA IDENTITY DEFAULT, a large value that an update left unchanged): %s, so its value is not known; set REPLICA IDENTITY FULL on the source table", name, d.unavailable.text, why)}
}

// defaultOf is the column default of f as the NDJSON of internal/schema
// holds a value (Column.Default), written as the column's values are, ""
// for a default that is no value of its type. A column added to the
// source with a DEFAULT (ALTER TABLE … ADD COLUMN … DEFAULT) has it in
// every row the source holds, and the source writes no change of them:
// a changelog row whose image is from before the column takes it.
func (c *Change) defaultOf(f *field, hint *int) string {
	var tmp Column
	arena := len(c.arena)
	err := c.debeziumValue(&tmp, f, f.def)
	v := tmp.Value
	if tmp.to > tmp.from {
		v = c.arena[tmp.from:tmp.to]
	}
	def := ""
	// A time of exactly the epoch is Debezium's stand-in for a default
	// it does not evaluate (MySQL's CURRENT_TIMESTAMP, and a zero date,
	// MySqlDefaultValueConverter), not the time the source's rows took:
	// no default, as for PostgreSQL's now(), of which the schema says
	// nothing.
	if err == nil && v != nil && (tmp.Type != schema.Timestamp || string(v) != "0") {
		def = c.Table.defaults.intern(v, hint)
	}
	c.arena = c.arena[:arena] // the default's bytes are interned
	return def
}

// defaultUnavailable is what Debezium writes for a value it did not read
// (unavailable.value.placeholder's default): a PostgreSQL TOAST value an
// update did not change, under REPLICA IDENTITY DEFAULT (the PostgreSQL
// connector's documentation, "Considerations for TOASTed values").
const defaultUnavailable = "__debezium_unavailable_value"

// placeholder is a connector's unavailable.value.placeholder and the JSON
// values it writes for it.
type placeholder struct {
	text  string   // as the connector's text values hold it
	forms [][]byte // the JSON values, one per type
	min   int      // the length of the shortest form
}

// newPlaceholder is the placeholder configured as Debezium reads
// unavailable.value.placeholder (PostgresConnectorConfig.
// getUnavailableValuePlaceholder): "hex:" and hexadecimal octets, else
// the text's bytes; "" is the default. Its forms are the values the
// PostgreSQL connector writes for it, one per type
// (UnchangedToastedPlaceholder and UnchangedToastedReplicationMessageColumn.
// setUnchangedToastValue in debezium-connector-postgres): its text (text,
// json, jsonb, xml…, bytea in the hex and base64 modes); its bytes,
// base64 (bytea in the bytes mode); a list of its text (text[],
// varchar[], json[]…); a list of its bytes (bytea[]); a list of its
// bytes as numbers, each a Java byte, signed (integer[], bigint[],
// date[]); a list of the name-based UUID of its bytes
// (UUID.nameUUIDFromBytes: uuid[]); and a map of it to itself (hstore as
// a map, or as that map's JSON text in hstore.handling.mode=json).
func newPlaceholder(configured string) (placeholder, error) {
	raw := []byte(cmpOr(configured, defaultUnavailable))
	if h, ok := strings.CutPrefix(configured, "hex:"); ok {
		var err error
		if raw, err = hex.DecodeString(h); err != nil || len(raw) == 0 {
			return placeholder{}, fmt.Errorf("unavailable value placeholder %q: want text, or hex: and hexadecimal octets (Debezium's unavailable.value.placeholder)", configured)
		}
	}
	if !utf8.Valid(raw) {
		// Java's new String(raw) would write each malformed sequence as
		// U+FFFD, delimited as the JDK's decoder delimits them, in the
		// placeholder's text forms: not matched here, they would be stored
		// as values.
		return placeholder{}, fmt.Errorf("unavailable value placeholder %q: its octets are not UTF-8, and the text Debezium makes of them for text columns cannot be matched: use octets that are", configured)
	}
	text := string(raw)
	b64 := base64.StdEncoding.EncodeToString(raw)
	var numbers []byte
	for i, b := range raw {
		if i > 0 {
			numbers = append(numbers, ',')
		}
		numbers = strconv.AppendInt(numbers, int64(int8(b)), 10)
	}
	// UUID.nameUUIDFromBytes: MD5, version 3, IETF variant.
	h := md5.Sum(raw)
	h[6] = h[6]&0x0f | 0x30
	h[8] = h[8]&0x3f | 0x80
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	hstore := "{" + jsonText(text) + ":" + jsonText(text) + "}"
	p := placeholder{text: text, forms: [][]byte{
		[]byte(jsonText(text)),
		[]byte(jsonText(b64)),
		[]byte("[" + jsonText(text) + "]"),
		[]byte("[" + jsonText(b64) + "]"),
		append(append([]byte{'['}, numbers...), ']'),
		[]byte(`["` + uuid + `"]`),
		[]byte(hstore),
		[]byte(jsonText(hstore)),
	}}
	p.min = len(p.forms[0])
	for _, f := range p.forms {
		p.min = min(p.min, len(f))
	}
	return p, nil
}

// jsonText is s as a JSON string, as Kafka Connect's JsonConverter
// (Jackson's default escapes) writes it: ", \ and the control
// characters escaped (\b \t \n \f \r, the others \u00XX in upper
// case), every other character as it is (no HTML escapes, nor Go's of
// U+2028 and U+2029).
func jsonText(s string) string {
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return string(append(b, '"'))
}

// is says whether v, a column's JSON value, is one of the placeholder's
// forms.
func (p placeholder) is(v []byte) bool {
	if len(v) < p.min {
		return false // the common case, at the cost of a length
	}
	for _, f := range p.forms {
		if bytes.Equal(v, f) {
			return true
		}
	}
	return false
}

// findField finds a column's field, first at i (the schema lists them in
// the row's order).
func findField(fields []field, name []byte, i int) *field {
	if i < len(fields) && bytes.Equal(fields[i].name, name) {
		return &fields[i]
	}
	for j := range fields {
		if bytes.Equal(fields[j].name, name) {
			return &fields[j]
		}
	}
	return nil
}

// bitsSchema is the logical type of a BIT(n) of more than one bit
// (debezium-core's io.debezium.data.Bits).
const bitsSchema = "io.debezium.data.Bits"

// debeziumValue types and writes one value by its field.
func (c *Change) debeziumValue(col *Column, f *field, v []byte) error {
	if string(f.logical) == bitsSchema && f.bits > 1 && f.bits <= 64 {
		return c.debeziumBits(col, f, v)
	}
	lt, logical := logicalTypes[string(f.logical)]
	if !logical {
		typ, ok := connectTypes[string(f.typ)]
		if !ok {
			typ = schema.String
		}
		lt = logicalType{typ: typ, conv: asIs}
	}
	col.Type, col.Precision, col.Scale = lt.typ, f.precision, f.scale
	if isNull(v) {
		return nil
	}
	if lt.fromText() {
		col.SourceText = v
	}
	if inf, ok := lt.infinite(v); ok {
		c.putInt(col, inf)
		return nil
	}
	switch lt.conv {
	case asIs:
		if !fits(lt.typ, v) {
			return errNotType(v, f)
		}
		if string(f.typ) == "array" {
			if item := logicalTypes[string(f.itemLogical)]; convertsItems(item) {
				// A PostgreSQL numeric[], date[] or timestamp[]: its
				// items as Debezium writes them are no number or time
				// to a reader (a Decimal is the base64 of an unscaled
				// integer whose scale only the schema says, a date its
				// days since 1970).
				if item.conv == fromDecimal {
					if err := checkScale(v, f.itemScale, f.itemHasScale); err != nil {
						return err
					}
				}
				if !c.putItems(col, v, item, f.itemScale) {
					return errNotType(v, f)
				}
				return nil
			}
		}
		col.Value = v
	case fromDecimal:
		if isNumber(v) {
			// Kafka Connect's JsonConverter with decimal.format=NUMERIC
			// (KIP-481) writes the decimal itself, its scale in its text.
			if !c.putDecimalNumber(col, v) {
				return errNotType(v, f)
			}
			return nil
		}
		u, ok := decodeBase64(nil, v)
		if !ok {
			return errNotType(v, f)
		}
		if err := checkScale(v, f.scale, f.hasScale); err != nil {
			return err
		}
		c.putDecimal(col, u, f.scale)
	case fromVarDecimal:
		u, s, ok := varDecimal(v)
		if !ok {
			return errNotType(v, f)
		}
		if err := checkScale(v, s, true); err != nil {
			return err
		}
		c.putDecimal(col, u, s)
	case fromDays, fromMillis, fromNanos, fromISO, fromISODate, fromISOLocal, fromISOTime:
		us, zero, ok := lt.micros(v)
		if !ok && lt.typ == schema.Timestamp && isInteger(v) {
			// A date or time of the type's unit beyond int64's µs (an
			// infinite date PostgreSQL's JDBC driver gave a snapshot as
			// the year 292278994).
			return errorString(fmt.Sprintf("%s (%s) is out of the range of a timestamp", clip(v), f.logical))
		}
		if !ok {
			return errNotType(v, f)
		}
		if !zero {
			c.putInt(col, us)
		}
	case fromJSONText:
		if !c.putJSONText(col, v) {
			return errNotType(v, f)
		}
	}
	return nil
}

// debeziumBits writes a BIT(n) of up to 64 bits, which Debezium gives as
// its bits little-endian in bytes (base64 in JSON; JdbcValueConverters.
// convertBits, the MySQL connector's documentation, BIT(>1)), as the
// unsigned number they make: what the source's BIT holds, and how Canal's
// changes of the column load (canal.go: a BIGINT, a BIT(64) the
// DECIMAL(20,0) its high bit needs). As base64 text the model held "BQ=="
// for b'101'. A longer bit string (PostgreSQL's bit(n), n > 64) is no
// number a column holds and stays the base64 text.
func (c *Change) debeziumBits(col *Column, f *field, v []byte) error {
	col.Type = schema.Int64
	if f.bits == 64 {
		col.Type, col.Precision = schema.Decimal, 20
	}
	if isNull(v) {
		return nil
	}
	// A changelog table of a release before 2026-12-07 holds the column
	// as that text, and goes on taking it rather than numbers among it.
	col.SourceText = v
	var scratch [16]byte
	u, ok := decodeBase64(scratch[:0], v)
	if !ok || len(u) > 8 {
		return errNotType(v, f)
	}
	var n uint64
	for i := len(u) - 1; i >= 0; i-- {
		n = n<<8 | uint64(u[i])
	}
	if f.bits < 64 && n>>f.bits != 0 {
		return errorString(fmt.Sprintf("%s has bits past the %d of its %s", clip(v), f.bits, f.logical))
	}
	if col.Type == schema.Decimal {
		var digits [20]byte
		c.putQuoted(col, strconv.AppendUint(digits[:0], n, 10))
		return nil
	}
	c.putInt(col, int64(n))
	return nil
}

// maxDecimalScale is the largest scale, after the point or (negative)
// before it, of a decimal written as its exact text: PostgreSQL's numeric
// holds 16383 digits after the point (its dscale field, NUMERIC_DSCALE_MAX),
// more than any other database Debezium reads (Oracle's NUMBER -84 to 127,
// MySQL's DECIMAL 30, SQL Server's 38). appendDecimal writes a zero per unit
// of scale past the unscaled value's digits, so a scale far past it (a
// VariableScaleDecimal's is any int32, a Decimal's any schema parameter)
// would make a message of a hundred bytes gigabytes of text: the process
// runs out of memory on it at every restart.
const maxDecimalScale = 16383

// checkScale refuses a decimal v whose scale is not known (known false: a
// Decimal schema without its scale parameter, which Kafka Connect's
// Decimal.scale refuses too, "Invalid Decimal schema: scale parameter not
// found", Debezium's CHANGELOG.md, DBZ-3371; read as 0, 123.45 was stored
// as 12345) or that no database has (see maxDecimalScale), before its text
// is written.
func checkScale(v []byte, scale int, known bool) error {
	if !known {
		return errorString(clip(v) + " is a Decimal whose schema gives no scale (parameters.scale, an integer): where its point goes is not known")
	}
	if scale > maxDecimalScale || scale < -maxDecimalScale {
		return errorString(fmt.Sprintf("%s has a scale of %d, beyond any database's decimal (at most %d digits either side of the point): "+
			"its exact text would be that many digits long", clip(v), scale, maxDecimalScale))
	}
	return nil
}

// varDecimal reads a VariableScaleDecimal, {"scale":s,"value":base64}:
// its unscaled value's bytes and its scale.
func varDecimal(v []byte) (u []byte, scale int, ok bool) {
	var sc, value []byte
	it, isObject := open(v, '{')
	for k, v, more := it.member(); isObject && more; k, v, more = it.member() {
		switch string(k) {
		case "scale":
			sc = v
		case "value":
			value = v
		}
	}
	scale, err := strconv.Atoi(string(sc))
	u, okU := decodeBase64(nil, value)
	return u, scale, err == nil && okU
}

// toMicros converts n of a time's unit (conv fromDays, fromMillis,
// fromNanos, or asIs for µs) to µs, false on overflow.
func toMicros(conv conversion, n int64) (int64, bool) {
	switch conv {
	case fromDays:
		return mulExact(n, usPerDay)
	case fromMillis:
		return mulExact(n, usPerMs)
	case fromNanos:
		return floorDiv(n, 1000), true
	}
	return n, true
}

// convertsItems says whether putItems writes an array of item.
func convertsItems(item logicalType) bool {
	return item.conv == fromDecimal || item.conv == fromVarDecimal || item.conv == fromJSONText ||
		item.typ == schema.Timestamp && item.conv != fromISO ||
		item.typ == schema.Int64 // a time of day: logicalTypes' only Int64s
}

// fromText says whether lt is one of time.precision.mode=isostring's
// types, JSON strings read into a time, which a release before ac48d7f
// stored as their text (Column.SourceText). ZonedTimestamp was always a
// timestamp.
func (lt logicalType) fromText() bool {
	return lt.conv == fromISODate || lt.conv == fromISOLocal || lt.conv == fromISOTime
}

// isDate says whether a value of lt is a date, without time of day.
func (lt logicalType) isDate() bool { return lt.conv == fromDays || lt.conv == fromISODate }

// putItems writes a JSON array of Debezium's items of type item (scale:
// a Decimal's) as PostgreSQL's to_json writes the array, nulls kept:
// decimals as their exact numbers, [12.34,null,-0.05]; dates and
// timestamps (without zone) as ISO text, ["2018-06-20"],
// ["2018-06-20T13:37:03.123456"]; times of day as ["13:37:03.123"]
// (the connector's unit, ms, µs or ns, or its UTC text with
// time.precision.mode=isostring, is the item schema's alone); an infinite
// date or timestamp as "infinity" or "-infinity"; json documents as
// themselves, [{"a": 1}]. False if an item is not of the type.
func (c *Change) putItems(col *Column, v []byte, item logicalType, scale int) bool {
	from := len(c.arena)
	c.arena = append(c.arena, '[')
	it, _ := open(v, '[')
	var u []byte
	for i := 0; ; i++ {
		v, more := it.element()
		if !more {
			break
		}
		if i > 0 {
			c.arena = append(c.arena, ',')
		}
		if isNull(v) {
			c.arena = append(c.arena, "null"...)
			continue
		}
		ok := false
		switch item.conv {
		case fromDecimal:
			if isNumber(v) {
				c.arena, ok = appendDecimalNumber(c.arena, v) // decimal.format=NUMERIC
			} else if u, ok = decodeBase64(u, v); ok {
				c.arena = appendDecimal(c.arena, u, scale)
			}
		case fromVarDecimal:
			var s int
			if u, s, ok = varDecimal(v); ok && checkScale(v, s, true) == nil {
				c.arena = appendDecimal(c.arena, u, s)
			} else {
				ok = false
			}
		case fromJSONText:
			// A json[]'s document, the text of a string: the array
			// holds the document, as a json column does.
			if !isString(v) {
				break
			}
			mark := len(c.arena)
			doc, grown := unquote(c.arena, v)
			if grown {
				c.arena, doc = doc, doc[mark:]
			}
			if ok = validJSON(doc); ok && !grown {
				c.arena = append(c.arena, doc...)
			}
		default:
			if inf, isInf := item.infinite(v); isInf {
				// PostgreSQL's to_json writes an infinite date or
				// timestamp as its text.
				if inf > 0 {
					c.arena = append(c.arena, `"infinity"`...)
				} else {
					c.arena = append(c.arena, `"-infinity"`...)
				}
				ok = true
				break
			}
			var us int64
			var zero bool
			us, zero, ok = item.micros(v)
			switch {
			case !ok || zero:
				ok = false
			case item.typ == schema.Int64:
				if ok = us >= 0 && us <= usPerDay; ok {
					c.arena = appendTimeOfDay(c.arena, us)
				}
			case us >= minTimestamp && us <= maxTimestamp:
				layout := "2006-01-02T15:04:05.999999"
				if item.isDate() {
					layout = "2006-01-02"
				}
				c.arena = append(c.arena, '"')
				c.arena = time.UnixMicro(us).UTC().AppendFormat(c.arena, layout)
				c.arena = append(c.arena, '"')
			default:
				ok = false
			}
		}
		if !ok {
			c.arena = c.arena[:from]
			return false
		}
	}
	c.arena = append(c.arena, ']')
	col.from, col.to = int32(from), int32(len(c.arena))
	return true
}

// appendTimeOfDay appends us µs past midnight as PostgreSQL writes a
// time, quoted: "13:37:03.123", trailing zeros of the fraction dropped,
// "24:00:00" for the end of the day.
func appendTimeOfDay(dst []byte, us int64) []byte {
	s := us / 1e6
	dst = fmt.Appendf(dst, `"%02d:%02d:%02d`, s/3600, s/60%60, s%60)
	if frac := us % 1e6; frac != 0 {
		dst = append(dst, strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")...)
	}
	return append(dst, '"')
}

// fits says whether v is a value of type t as internal/schema's NDJSON
// holds it.
func fits(t schema.Type, v []byte) bool {
	switch t {
	case schema.Int32, schema.Int64, schema.Timestamp:
		return isInteger(v)
	case schema.Float64:
		// Kafka Connect writes NaN and the infinities as strings.
		return isNumber(v) || string(v) == `"NaN"` || string(v) == `"Infinity"` || string(v) == `"-Infinity"`
	case schema.Bool:
		return string(v) == "true" || string(v) == "false"
	case schema.String:
		return isString(v)
	}
	return true // JSON: any value
}

func errNotType(v []byte, f *field) error {
	t := f.logical
	if t == nil {
		t = f.typ
	}
	return &valueError{value: clip(v), typ: string(t)}
}

type valueError struct{ value, typ string }

func (e *valueError) Error() string { return e.value + " is not a value of " + e.typ }

// clip is v for an error message, cut short: a reason is one line.
func clip(v []byte) string {
	most := 64
	if len(v) > most {
		// At a character's start: a reason is text, and half a
		// character would show as U+FFFD.
		for most > 0 && !utf8.RuneStart(v[most]) {
			most--
		}
		return string(v[:most]) + "…"
	}
	return string(v)
}

// debeziumSchemaChange decodes a message of a MySQL connector's schema
// change topic (EventDispatcher.SchemaChangeEventReceiver: source,
// databaseName, ddl and tableChanges, each {type, id, table} of
// ConnectTableChangeSerializer). A DROP TABLE is the one message of its
// table's end: the connector sends no change event of its rows (a table
// topic carries no drop), one DROP per table dropped
// (BinlogDatabaseSchema.parseDdl, DropTableParserListener), so it makes
// a truncation of the table at its position, as Canal's ERASE and
// Maxwell's table-drop do: the rows changed before it leave the model,
// those of a table created again under the name after it stay. A DROP
// DATABASE names no table (DropDatabaseParserListener signals the
// database's drop alone, an event of type DATABASE: databaseName, its
// ddl and no tableChanges), and drops each table of the database the
// decoder knows (dropDatabase). A TRUNCATE TABLE (no tableChanges: its
// ddl names the table), and MariaDB's CREATE OR REPLACE TABLE, are a
// truncation of the table at its position. The other DDL makes no
// change.
//
// A snapshot's schema change events are no statement of the log: before
// each table's schema the snapshot writes DROP TABLE IF EXISTS, and DROP
// DATABASE IF EXISTS before each database's, to rebuild the schema
// history (BinlogSnapshotChangeEventSource.readTableStructure), also in
// snapshot.mode no_data, which reads no row again; their source.snapshot
// is "true" (or another value than "false"; before Debezium 1.0 the
// boolean true). Taken as drops, they would
// empty models of tables that still hold their rows.
func (d *Decoder) debeziumSchemaChange(dst []Change, payload, source, tableChanges []byte) ([]Change, error) {
	if s := member(source, "snapshot"); !isNull(s) && string(s) != "false" && string(text(s)) != "false" {
		// Any value but false, of any JSON type: Debezium before 1.0
		// wrote a boolean (DBZ-1295 made it the string enum).
		return dst, nil
	}
	src := readSource(source)
	if _, ok := droppedDatabase(text(member(payload, "ddl"))); ok {
		db := text(member(payload, "databaseName"))
		if len(db) == 0 {
			return dst, d.errorf("a DROP DATABASE without its databaseName")
		}
		return d.dropDatabase(dst, db, src.position, src.timeUs, func(t *Table) bool { return !t.fromOtherServers(src.server) })
	}
	if droppedTemporary(text(member(payload, "ddl"))) {
		// DropTableParserListener signals a DROP TEMPORARY TABLE as a
		// drop of the table it names (its ddl keeps the statement's
		// start): a session's temporary table, which may shadow a table
		// of the same name whose rows stay.
		return dst, nil
	}
	db, name, ok := truncatedTable(text(member(payload, "ddl")))
	if !ok {
		// MariaDB's CREATE OR REPLACE TABLE (a CREATE of the table, from
		// the MariaDB connector) drops the table before creating it
		// again: as a truncation, the rows before it leave the model.
		db, name, ok = replacedTable(text(member(payload, "ddl")))
	}
	if ok {
		// A TRUNCATE TABLE (a schema change of type TRUNCATE, which has
		// no tableChanges): the connector sends an op "t" on the table's
		// topic only when skipped.operations leaves out "t", which it
		// holds by default, so this message may be the truncation's only
		// trace; a truncation twice at one position is one. Or a CREATE
		// OR REPLACE TABLE.
		if db == "" {
			db = string(text(member(payload, "databaseName")))
		}
		if db == "" {
			return dst, d.errorf("a TRUNCATE or CREATE OR REPLACE of table %q without its database", name)
		}
		table, err := d.router.route([]byte(db), nil, []byte(name))
		if err != nil {
			return dst, routeError(err)
		}
		if table.fromOtherServers(src.server) {
			return dst, nil
		}
		return truncation(dst, table, src.position, src.timeUs), nil
	}
	changes, _ := open(tableChanges, '[')
	for v, ok := changes.element(); ok; v, ok = changes.element() {
		if string(text(member(v, "type"))) != "DROP" {
			continue
		}
		id := text(member(v, "id"))
		parts, ok := quotedParts(id)
		if !ok || len(parts) < 2 || len(parts) > 3 {
			return dst, d.errorf("a DROP of table %q, which is not Debezium's \"database\".\"table\"", id)
		}
		db, schemaName, tbl := parts[0], []byte(nil), parts[len(parts)-1]
		if len(parts) == 3 {
			schemaName = parts[1]
		}
		table, err := d.router.route(db, schemaName, tbl)
		if err != nil {
			return dst, routeError(err)
		}
		if table.fromOtherServers(src.server) {
			continue
		}
		dst = truncation(dst, table, src.position, src.timeUs)
	}
	return dst, nil
}

// SchemaChangeServer says whether value, a record decoded without error,
// is a message of a Debezium connector's schema change topic (no op; ddl
// or tableChanges: see debeziumSchemaChange), and gives its server
// (source.name), "" when it names none. Such a topic is known by what it
// carries, not by its name: the connector names it as the server
// (topic.prefix), but a RegexRouter over every topic of the connector,
// or a topic naming strategy of one's own, routes it to another name
// (prod.dbserver1), and it still carries the server's DROP TABLE and DROP
// DATABASE. Snapshot statements count too: they come on the same topic.
// Always false for Canal and Maxwell, whose DDL comes on the tables'
// topics. It reads the record again: call it for a record whose changes
// carry no row (most records carry one).
func (d *Decoder) SchemaChangeServer(value []byte) (string, bool) {
	if d.format != FormatDebezium {
		return "", false
	}
	value = bytes.TrimSpace(value)
	if len(value) == 0 || value[0] != '{' {
		return "", false
	}
	_, payload, wrapped := connectEnvelope(value)
	if !wrapped {
		payload = value
	} else if isNull(payload) {
		return "", false
	}
	var op, ddl, tableChanges, source []byte
	it, ok := open(payload, '{')
	if !ok {
		return "", false
	}
	for k, v, ok := it.member(); ok; k, v, ok = it.member() {
		switch string(k) {
		case "op":
			op = v
		case "ddl":
			ddl = v
		case "tableChanges":
			tableChanges = v
		case "source":
			source = v
		}
	}
	if op != nil || ddl == nil && tableChanges == nil {
		return "", false
	}
	return string(readSource(source).server), true
}

// sawServer records that a change of t came from Debezium server
// (source.name; nil: not said).
func (t *Table) sawServer(server []byte) {
	if server == nil {
		return
	}
	for {
		p := t.servers.Load()
		var had []string
		if p != nil {
			had = p.list
		}
		if hasServer(had, server) {
			return
		}
		grown := append(had[:len(had):len(had)], string(server))
		if t.servers.CompareAndSwap(p, &serverSet{grown, strings.Join(grown, ",")}) {
			return
		}
	}
}

// sawKey records key, the key of a change of t with a row: copied only
// when it differs from the one recorded, the names being interned.
func (t *Table) sawKey(key []string) {
	if len(key) == 0 {
		return
	}
	if p := t.key.Load(); p != nil && slices.Equal(*p, key) {
		return
	}
	k := slices.Clone(key)
	t.key.Store(&k)
}

// keyedBy says whether a tombstone keyed by key can be of t: the key of
// t's changes, when this process has decoded one. A table known from an
// earlier process alone (Claim), whose key the decoder has not seen, takes
// any key.
func (t *Table) keyedBy(key []string) bool {
	p := t.key.Load()
	return p == nil || slices.Equal(*p, key)
}

// fromOtherServers says whether the changes of t (decoded in this
// process, or, for a table an earlier process created, the changes it
// was created for) all came from Debezium servers other than server: a
// schema change of server (its DROP TABLE or DROP DATABASE) is then no
// drop of t. A schema change topic carries the DDL of every database of
// its server, captured or not, and one run may read several servers: a
// database or table of one server's name dropped on another is another
// table, and its position another binlog's. A table whose server is not
// known (made by a release that did not record it, or by changes that
// name none), or a drop that names no server, is taken as the server's.
func (t *Table) fromOtherServers(server []byte) bool {
	p := t.servers.Load()
	return server != nil && p != nil && !hasServer(p.list, server)
}

// serverSet is a table's Debezium servers and the same joined by commas
// (made once per server added, not per row: Server runs for every row).
// Debezium allows no comma in a server's name (topic.prefix, formerly
// database.server.name: letters, digits, '.', '_' and '-').
type serverSet struct {
	list   []string
	joined string
}

// Server is the Debezium servers (source.name) whose changes of t were
// seen, joined by commas in the order seen, "" for none: what the
// registry of changelog tables records with a table, for Claim. Every
// server: a table whose changes came from two is dropped by either's
// DROP TABLE, after a restart as before one.
func (t *Table) Server() string {
	if p := t.servers.Load(); p != nil {
		return p.joined
	}
	return ""
}

// hasServer says whether server is among servers (without a copy of it:
// sawServer runs for every row).
func hasServer(servers []string, server []byte) bool {
	for _, s := range servers {
		if s == string(server) {
			return true
		}
	}
	return false
}

// quotedParts splits a Debezium table id written by
// TableId.toDoubleQuotedString, "catalog"."schema"."table" (a part's
// quotes doubled), into its parts; false when id is not of that form.
func quotedParts(id []byte) ([][]byte, bool) {
	var parts [][]byte
	for i := 0; ; {
		if i >= len(id) || id[i] != '"' {
			return nil, false
		}
		var part []byte
		for i++; ; i++ {
			if i >= len(id) {
				return nil, false
			}
			if id[i] == '"' {
				if i+1 < len(id) && id[i+1] == '"' {
					part = append(part, '"')
					i++
					continue
				}
				i++
				break
			}
			part = append(part, id[i])
		}
		parts = append(parts, part)
		if i == len(id) {
			return parts, true
		}
		if id[i] != '.' {
			return nil, false
		}
		i++
	}
}
