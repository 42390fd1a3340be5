package cdc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
)

// fixture is a testdata file: a description, then the sections topic, key,
// value (the Kafka record) and want (the changes, written by hand from the
// tools' documentation).
type fixture struct {
	topic      string
	key, value []byte
	want       string
	format     Format
}

func readFixture(t *testing.T, path string) fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var name string
	for line := range strings.Lines(string(b)) {
		if h, ok := strings.CutPrefix(line, "-- "); ok && strings.HasSuffix(h, " --\n") {
			name = strings.TrimSuffix(h, " --\n")
			sections[name] = ""
			continue
		}
		if name != "" {
			sections[name] += line
		}
	}
	f := fixture{
		topic: strings.TrimSpace(sections["topic"]),
		key:   []byte(strings.TrimSpace(sections["key"])),
		value: []byte(strings.TrimSpace(sections["value"])),
		want:  sections["want"],
	}
	f.format = Format(strings.SplitN(filepath.Base(path), "_", 2)[0])
	return f
}

var typeNames = map[schema.Type]string{
	schema.String: "String", schema.Int32: "Int32", schema.Int64: "Int64", schema.Float64: "Float64",
	schema.Bool: "Bool", schema.Timestamp: "Timestamp", schema.JSON: "JSON", schema.Decimal: "Decimal",
}

// render writes changes as the fixtures' want sections do.
func render(changes []Change) string {
	var b strings.Builder
	for _, c := range changes {
		tbl := c.Table.Database + "." + c.Table.Name
		if c.Table.Schema != "" {
			tbl = c.Table.Database + "." + c.Table.Schema + "." + c.Table.Name
		}
		var pos []string
		for _, p := range c.Position.Parts() {
			pos = append(pos, fmt.Sprint(p))
		}
		fmt.Fprintf(&b, "%s %s log=%s model=%s key=%s pos=%s time=%d\n", c.Op, tbl, c.Table.Log, c.Table.Model,
			strings.Join(c.Key, ","), strings.Join(pos, "."), c.SourceTime)
		col := func(prefix string, col Column) {
			typ := typeNames[col.Type]
			if col.Precision != 0 || col.Scale != 0 {
				typ += fmt.Sprintf("(%d,%d)", col.Precision, col.Scale)
			}
			src := col.SourceType
			if src == "" {
				src = "-"
			}
			v := "null"
			if col.Value != nil {
				v = string(col.Value)
			}
			if col.Unavailable {
				v = "unread"
			}
			fmt.Fprintf(&b, "  %s%s %s %s = %s\n", prefix, col.Name, typ, src, v)
		}
		for _, c := range c.Columns {
			col("", c)
		}
		for _, c := range c.Before {
			col("before ", c)
		}
		if c.Statement != nil {
			fmt.Fprintf(&b, "  sql %s\n", c.Statement)
		}
	}
	return b.String()
}

func TestFixtures(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			f := readFixture(t, path)
			d, err := NewDecoder(Options{Format: f.format})
			if err != nil {
				t.Fatal(err)
			}
			changes, err := d.Decode(nil, f.topic, f.key, f.value)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(changes); got != f.want {
				t.Errorf("got\n%s\nwant\n%s", got, f.want)
			}
			// Decoding again into the same changes (reused) gives the same.
			again, err := d.Decode(changes[:0], f.topic, f.key, f.value)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(again); got != f.want {
				t.Errorf("decoded again into reused changes:\n%s\nwant\n%s", got, f.want)
			}
		})
	}
}

// One decoder serves goroutines at once: routes and names are created
// while others read them (run with -race).
func TestConcurrentDecode(t *testing.T) {
	f := readFixture(t, "testdata/canal_insert.txt")
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var changes []Change
			var err error
			for i := range 50 {
				v := strings.Replace(string(f.value), `"table":"orders"`, fmt.Sprintf(`"table":"t%d"`, (g+i)%7), 1)
				if changes, err = d.Decode(changes[:0], f.topic, nil, []byte(v)); err != nil || len(changes) != 2 {
					t.Errorf("got %d changes, %v", len(changes), err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A PostgreSQL numeric[] comes from Debezium (decimal.handling.mode
// precise) as an array of Decimals, each the base64 of its unscaled value,
// whose scale is the items schema's alone (or of VariableScaleDecimals,
// {scale, value}, for numeric[] without a precision): the changelog's
// JSON holds the numbers, exact, as PostgreSQL's to_json writes them.
func TestDebeziumNumericArrayKeepsItsDecimals(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[` +
		`{"field":"id","type":"int32"},` +
		`{"field":"prices","type":"array","optional":true,"items":{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"30"}}},` +
		`{"field":"amounts","type":"array","optional":true,"items":{"type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","fields":[{"field":"scale","type":"int32"},{"field":"value","type":"bytes"}]}}` +
		`]}]},"payload":{"before":null,"after":{"id":1,` +
		`"prices":["BNI=",null,"+w==","AQAAAAAAAAAA"],` +
		`"amounts":[{"scale":3,"value":"BNI="},{"scale":0,"value":"/nEW8Ak8jB8RscD1Lg=="},null]},` +
		`"op":"c","source":{"db":"postgres","schema":"public","table":"t","lsn":7}}}`
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"prices":  `[12.34,null,-0.05,184467440737095516.16]`,
		"amounts": `[1.234,-123456789012345678901234567890,null]`,
	}
	for _, col := range got[0].Columns {
		if w, ok := want[col.Name]; ok && string(col.Value) != w {
			t.Errorf("%s = %s, want %s", col.Name, col.Value, w)
		}
	}
	// An item that is no Decimal is refused, not kept as it came (a
	// number is one: decimal.format=NUMERIC, see
	// TestDebeziumDecimalAsAJSONNumber).
	bad := strings.Replace(value, `"BNI=",null`, `"BNI=",true`, 1)
	if _, err := d.Decode(nil, "srv.public.t", nil, []byte(bad)); err == nil {
		t.Errorf("a numeric[] holding true where a Decimal's bytes go: no error")
	}
}

// A Kafka key without the schema wrapper is the key columns' object: a
// primary key column named payload (or schema) is a column, not the
// JsonConverter's wrapper, whose payload would be taken for the key.
func TestDebeziumKeyColumnNamedPayload(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"before":null,"after":{"payload":5,"schema":"s","v":1},"op":"c","source":{"db":"d","table":"t","file":"mysql-bin.000001","pos":4}}`
	for key, want := range map[string]string{
		`{"payload":5}`:              "payload",
		`{"schema":"s","payload":5}`: "schema,payload",
		`{"schema":{"type":"struct","fields":[{"field":"payload","type":"int32"}]},"payload":{"payload":5}}`: "payload",
	} {
		got, err := d.Decode(nil, "srv.d.t", []byte(key), []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		if k := strings.Join(got[0].Key, ","); k != want {
			t.Errorf("key %s: key columns %q, want %q", key, k, want)
		}
	}
}

// A PostgreSQL date[] or timestamp[] comes from Debezium as an array of
// its items' numbers (days since 1970, µs or ms since 1970 as the
// time.precision.mode says): the changelog's JSON holds the dates and
// times, as PostgreSQL's to_json writes them, not numbers whose unit only
// the schema said.
// A PostgreSQL time[] holds times of day whose unit only the item schema
// says (ms, µs or ns by time.precision.mode): they are written as
// to_json writes them, not as counts in whichever unit the connector used.
func TestDebeziumTimeArraysAreTimesOfDay(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[` +
		`{"field":"id","type":"int32"},` +
		`{"field":"micros","type":"array","optional":true,"items":{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1}},` +
		`{"field":"millis","type":"array","optional":true,"items":{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Time","version":1}},` +
		`{"field":"nanos","type":"array","optional":true,"items":{"type":"int64","optional":true,"name":"io.debezium.time.NanoTime","version":1}}` +
		`]}]},"payload":{"before":null,"after":{"id":1,` +
		`"micros":[49023123456,null,86400000000],` +
		`"millis":[49023123],` +
		`"nanos":[49023123456789,0]},` +
		`"op":"c","source":{"db":"postgres","schema":"public","table":"t","lsn":7}}}`
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"micros": `["13:37:03.123456",null,"24:00:00"]`,
		"millis": `["13:37:03.123"]`,
		"nanos":  `["13:37:03.123456","00:00:00"]`,
	}
	for _, col := range got[0].Columns {
		if w, ok := want[col.Name]; ok && string(col.Value) != w {
			t.Errorf("%s = %s, want %s", col.Name, col.Value, w)
		}
	}
}

func TestDebeziumDateAndTimestampArraysAreTimes(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[` +
		`{"field":"id","type":"int32"},` +
		`{"field":"days","type":"array","optional":true,"items":{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1}},` +
		`{"field":"stamps","type":"array","optional":true,"items":{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}},` +
		`{"field":"millis","type":"array","optional":true,"items":{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1}},` +
		`{"field":"zoned","type":"array","optional":true,"items":{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1}}` +
		`]}]},"payload":{"before":null,"after":{"id":1,` +
		`"days":[17702,null,-1],` +
		`"stamps":[1529501823123456,-1],` +
		`"millis":[1529501823000],` +
		`"zoned":["2018-06-20T13:37:03Z"]},` +
		`"op":"c","source":{"db":"postgres","schema":"public","table":"t","lsn":7}}}`
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"days":   `["2018-06-20",null,"1969-12-31"]`,
		"stamps": `["2018-06-20T13:37:03.123456","1969-12-31T23:59:59.999999"]`,
		"millis": `["2018-06-20T13:37:03"]`,
		"zoned":  `["2018-06-20T13:37:03Z"]`,
	}
	for _, col := range got[0].Columns {
		if w, ok := want[col.Name]; ok && string(col.Value) != w {
			t.Errorf("%s = %s, want %s", col.Name, col.Value, w)
		}
	}
}

// pgMessage is a Debezium PostgreSQL change event (schemas on) of table
// public.t: an insert of row (its after image's members, in order, as
// JSON) whose after struct has fields (each a field's schema, JSON).
func pgMessage(fields []string, row string) string {
	return `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","optional":true,"name":"srv.public.t.Value","fields":[` +
		`{"field":"id","type":"int32"},` + strings.Join(fields, ",") + `]}],"optional":false,"name":"srv.public.t.Envelope"},` +
		`"payload":{"before":null,"after":{"id":1,` + row + `},"op":"c","source":{"connector":"postgresql","db":"postgres","schema":"public","table":"t","lsn":7}}}`
}

// columnValues are a change's columns' values by name ("null" for null).
func columnValues(c *Change) map[string]string {
	out := map[string]string{}
	for _, col := range c.Columns {
		v := "null"
		if col.Value != nil {
			v = string(col.Value)
		}
		out[col.Name] = v
	}
	return out
}

// PostgreSQL's infinity and -infinity dates and timestamps come from
// Debezium as sentinel values, one pair per logical type
// (PostgresValueConverter and the connector's documentation, "TIMESTAMP
// type", "time.precision.mode=nanoseconds"; debezium-connector-postgres'
// AbstractRecordsProducerTest and PostgresTemporalPrecisionHandlingIT):
// they are the changelog's infinities, not timestamps of the year 294247
// (a MicroTimestamp's 9223372036825200000 µs is in range) nor dead letters
// (a Date's -2147472692 days overflows µs).
func TestDebeziumPostgresInfinityIsInfinity(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	const inf, ninf = "9223372036854775807", "-9223372036854775807"
	field := func(name, typ, logical string) string {
		return fmt.Sprintf(`{"field":%q,"type":%q,"optional":true,"name":%q,"version":1}`, name, typ, logical)
	}
	types := []struct{ typ, logical, pos, neg string }{
		{"int64", "io.debezium.time.MicroTimestamp", "9223372036825200000", "-9223372036832400000"},
		{"int64", "io.debezium.time.Timestamp", "9223372036825200", "-9223372036832400"},
		{"int64", "org.apache.kafka.connect.data.Timestamp", "9223372036825200", "-9223372036832400"},
		{"int64", "io.debezium.time.NanoTimestamp", "9223372036854775807", "-9223372036854775808"},
		{"int32", "io.debezium.time.Date", "-2147472692", "-2147472691"},
		{"int32", "org.apache.kafka.connect.data.Date", "-2147472692", "-2147472691"},
		{"string", "io.debezium.time.ZonedTimestamp", `"infinity"`, `"-infinity"`},
		{"string", "io.debezium.time.IsoTimestamp", `"+294247-01-10T04:00:25.2Z"`, `"-290308-12-21T19:59:27.6Z"`},
		{"string", "io.debezium.time.IsoDate", `"-5877611-06-21Z"`, `"-5877611-06-22Z"`},
	}
	var fields, row []string
	want := map[string]string{}
	for i, ty := range types {
		p, n := fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i)
		fields = append(fields, field(p, ty.typ, ty.logical), field(n, ty.typ, ty.logical))
		row = append(row, fmt.Sprintf("%q:%s,%q:%s", p, ty.pos, n, ty.neg))
		want[p], want[n] = inf, ninf
	}
	// A timestamp[] or date[] holds them as PostgreSQL's to_json writes
	// them.
	fields = append(fields,
		`{"field":"stamps","type":"array","optional":true,"items":{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}}`,
		`{"field":"days","type":"array","optional":true,"items":{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1}}`)
	row = append(row, `"stamps":[9223372036825200000,1529501823123456,-9223372036832400000]`, `"days":[-2147472692,17702,-2147472691]`)
	want["stamps"] = `["infinity","2018-06-20T13:37:03.123456","-infinity"]`
	want["days"] = `["infinity","2018-06-20","-infinity"]`
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, strings.Join(row, ","))))
	if err != nil {
		t.Fatal(err)
	}
	values := columnValues(&got[0])
	for name, w := range want {
		if values[name] != w {
			t.Errorf("%s = %s, want %s", name, values[name], w)
		}
	}
	for _, col := range got[0].Columns {
		if err := col.Fits(); err != nil {
			t.Errorf("%s: %v", col.Name, err)
		}
	}
	// A finite value next to a sentinel stays itself.
	got, err = d.Decode(nil, "srv.public.t", nil, []byte(pgMessage([]string{field("ts", "int64", "io.debezium.time.MicroTimestamp")}, `"ts":9223372036825199999`)))
	if err != nil {
		t.Fatal(err)
	}
	if v := columnValues(&got[0])["ts"]; v != "9223372036825199999" {
		t.Errorf("ts = %s, want 9223372036825199999", v)
	}
	// A snapshot's infinite date is no sentinel: PostgreSQL's JDBC driver
	// gives it as a date of the year 292278994, whose epoch day Debezium
	// truncates to an int (Date.toEpochDay), on a day that depends on the
	// connector's time zone. It is dead-lettered as out of range.
	_, err = d.Decode(nil, "srv.public.t", nil, []byte(pgMessage([]string{field("d", "int32", "io.debezium.time.Date")}, `"d":-622191233`)))
	if err == nil || !strings.Contains(err.Error(), "out of the range of a timestamp") {
		t.Errorf("a date of -622191233 days: %v; want it out of the range of a timestamp", err)
	}
}

// time.precision.mode=isostring writes dates, times and timestamps as
// UTC ISO-8601 text (io.debezium.time.IsoDate: DateTimeFormatter
// ISO_OFFSET_DATE, "2017-09-15Z"; IsoTime: ISO_OFFSET_TIME,
// "04:05:11.789Z"; IsoTimestamp: ISO_OFFSET_DATE_TIME,
// "2019-07-09T02:28:57.123456Z", a year past 9999 signed): they are the
// typed date, time of day and timestamp the other modes give, not text.
func TestDebeziumIsoStringTimesAreTyped(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	fields := []string{
		`{"field":"d","type":"string","optional":true,"name":"io.debezium.time.IsoDate","version":1}`,
		`{"field":"t","type":"string","optional":true,"name":"io.debezium.time.IsoTime","version":1}`,
		`{"field":"t0","type":"string","optional":true,"name":"io.debezium.time.IsoTime","version":1}`,
		`{"field":"ts","type":"string","optional":true,"name":"io.debezium.time.IsoTimestamp","version":1}`,
		`{"field":"big","type":"string","optional":true,"name":"io.debezium.time.IsoTimestamp","version":1}`,
		`{"field":"bc","type":"string","optional":true,"name":"io.debezium.time.IsoDate","version":1}`,
		`{"field":"days","type":"array","optional":true,"items":{"type":"string","optional":true,"name":"io.debezium.time.IsoDate","version":1}}`,
		`{"field":"times","type":"array","optional":true,"items":{"type":"string","optional":true,"name":"io.debezium.time.IsoTime","version":1}}`,
		`{"field":"stamps","type":"array","optional":true,"items":{"type":"string","optional":true,"name":"io.debezium.time.IsoTimestamp","version":1}}`,
	}
	row := `"d":"2017-09-15Z","t":"04:05:11.789Z","t0":"10:15:30Z","ts":"2019-07-09T02:28:57.123456Z","big":"+10000-01-01T00:00:00Z","bc":"-0001-12-31Z",` +
		`"days":["2018-06-20Z",null],"times":["13:37:03.123Z"],"stamps":["2018-06-20T13:37:03.123456Z"]`
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, row)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typ schema.Type
		v   string
	}{
		"d":      {schema.Timestamp, "1505433600000000"},
		"t":      {schema.Int64, "14711789000"},
		"t0":     {schema.Int64, "36930000000"},
		"ts":     {schema.Timestamp, "1562639337123456"},
		"big":    {schema.Timestamp, "253402300800000000"},
		"bc":     {schema.Timestamp, "-62167305600000000"},
		"days":   {schema.JSON, `["2018-06-20",null]`},
		"times":  {schema.JSON, `["13:37:03.123"]`},
		"stamps": {schema.JSON, `["2018-06-20T13:37:03.123456"]`},
	}
	for _, col := range got[0].Columns {
		w, ok := want[col.Name]
		if !ok {
			continue
		}
		if col.Type != w.typ || string(col.Value) != w.v {
			t.Errorf("%s = %s %s, want %s %s", col.Name, typeNames[col.Type], col.Value, typeNames[w.typ], w.v)
		}
	}
	// Text that is not the format is refused, not kept as text.
	if _, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields[:1], `"d":"15/09/2017"`))); err == nil {
		t.Error("an IsoDate of 15/09/2017 was taken")
	}
}

// Debezium's ByLogicalTableRouter (and ToLogicalTopicRouter), with
// key.enforce.uniqueness (its default), adds a field naming the physical
// table to the record key (key.field.name: __dbz__physicalTableIdentifier,
// or __dbz__sourceIdentifier for ToLogicalTopicRouter;
// debezium-connect-plugins' ToLogicalTopicRouter.updateKeySchema). It is
// no column of the row: the table's key is the row's key columns alone,
// with schemas or without.
func TestDebeziumRouterKeyFieldIsNoKeyColumn(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"before":null,"after":{"id":1,"v":"x"},"op":"c","source":{"db":"inventory","table":"customers_shard1","file":"mysql-bin.000001","pos":4}}`
	for _, key := range []string{
		`{"id":1,"__dbz__physicalTableIdentifier":"dbserver1.inventory.customers_shard1"}`,
		`{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":false,"field":"__dbz__physicalTableIdentifier"}],"optional":false,"name":"customers_all_shards.Key"},` +
			`"payload":{"id":1,"__dbz__physicalTableIdentifier":"dbserver1.inventory.customers_shard1"}}`,
		`{"id":1,"__dbz__sourceIdentifier":"dbserver1.inventory.customers_shard1"}`,
	} {
		got, err := d.Decode(nil, "customers_all_shards", []byte(key), []byte(value))
		if err != nil {
			t.Fatal(err)
		}
		if k := strings.Join(got[0].Key, ","); k != "id" {
			t.Errorf("key %s: key columns %q, want id", key, k)
		}
	}
}

// Maxwell's kafka_key_format=array writes the key as [database, table,
// [{pk: value}, …]], each primary key column's name lower-cased
// (RowIdentity.toKeyJson): its names are the table's key, matched to the
// row's columns as the hash format's are.
func TestMaxwellArrayKeyNamesTheKey(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatMaxwell})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"database":"test","table":"orders","type":"insert","ts":1449786310,"data":{"ID":1,"part2":"hello","v":3}}`
	for key, want := range map[string]string{
		`["test","orders",[{"id":1},{"part2":"hello"}]]`: "ID,part2",
		`["test","orders",[]]`:                           "", // no primary key
	} {
		got, err := d.Decode(nil, "maxwell", []byte(key), []byte(value))
		if err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		if k := strings.Join(got[0].Key, ","); k != want {
			t.Errorf("key %s: key columns %q, want %q", key, k, want)
		}
	}
	// An array of another shape names no key: refused, not taken as a
	// table without one.
	if _, err := d.Decode(nil, "maxwell", []byte(`["test","orders",{"id":1}]`), []byte(value)); err == nil {
		t.Error(`a key ["test","orders",{"id":1}] was taken`)
	}
}
