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
	// An item that is no Decimal is refused, not kept as it came.
	bad := strings.Replace(value, `"BNI=",null`, `"BNI=",7`, 1)
	if _, err := d.Decode(nil, "srv.public.t", nil, []byte(bad)); err == nil {
		t.Errorf("a numeric[] holding 7 where a Decimal's bytes go: no error")
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
