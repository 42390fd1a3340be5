package cdc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tracelake/tracelake/internal/envelope"
)

// druidEnum is an ENUM's or SET's type as Canal's mysqlType writes it
// (Druid's rendering: each label quoted, a quote doubled, nothing else
// escaped), as a JSON string.
func druidEnum(kind string, labels []string) []byte {
	quoted := make([]string, len(labels))
	for i, l := range labels {
		quoted[i] = "'" + strings.ReplaceAll(l, "'", "''") + "'"
	}
	return envelope.AppendString(nil, kind+"("+strings.Join(quoted, ",")+")")
}

// labelMessage is an INSERT into test.labels of one row per value of
// values: column e an ENUM of labels, column s a SET of them.
func labelMessage(labels []string, values [][2]string) []byte {
	var data []string
	for i, v := range values {
		data = append(data, fmt.Sprintf(`{"id":"%d","e":%s,"s":%s}`, i, v[0], v[1]))
	}
	return []byte(`{"data":[` + strings.Join(data, ",") + `],"database":"test","es":1796638273000,"id":9,"isDdl":false,` +
		`"mysqlType":{"id":"int(11)","e":` + string(druidEnum("enum", labels)) + `,"s":` + string(druidEnum("SET", labels)) + `},` +
		`"old":null,"pkNames":["id"],"sql":"","sqlType":{"id":4,"e":4,"s":-7},"table":"labels","ts":1796638273412,"type":"INSERT"}`)
}

// The labels of an ENUM or SET are written as they were before their
// types were cached: each label as encoding/json writes the string
// (HTML's <, > and & escaped, U+2028 and U+2029 too, a backspace as \b,
// a byte that is not UTF-8 as U+FFFD), the labels of a SET joined by
// commas; and a message decoded from the cache is the message decoded
// without it, byte for byte.
func TestCanalLabelsAsBefore(t *testing.T) {
	labels := []string{
		"it's", "''", "a,b", "(x)", "f('a','b')", "上海", "é\u2028\u2029", `C:\new`, `a\`, "", "2", "0",
		`<b>&amp;`, `say "hi"`, "tab\there\nline", "\x01\b\f", "not utf-8 \xff",
	}
	// The label each ENUM index and SET bit was written as: encoding/json's
	// string, as enumLabels wrote it before the cache.
	encoded := func(l string) string {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		return string(b[1 : len(b)-1])
	}
	var values [][2]string
	var want []string
	for i, l := range labels {
		// Row i: ENUM index i+1 (its label) and a SET of its label and the
		// first.
		mask := uint64(1)<<i | 1
		values = append(values, [2]string{fmt.Sprintf(`"%d"`, i+1), fmt.Sprintf(`"%d"`, mask)})
		set := encoded(labels[0])
		if i > 0 {
			set += "," + encoded(l)
		}
		want = append(want, `"`+encoded(l)+`"`, `"`+set+`"`)
	}
	values = append(values, [2]string{`"0"`, `"0"`}) // MySQL's error value, the empty SET
	want = append(want, `""`, `""`)
	msg := labelMessage(labels, values)

	uncached, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	uncached.canalTypes = nil // every message's types parsed again, as before the cache
	before, err := uncached.Decode(nil, "example", nil, msg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range before {
		got = append(got, string(c.Columns[1].Value), string(c.Columns[2].Value))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("labels written as\n%q\nwant (encoding/json's)\n%q", got, want)
	}

	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // parsed, then from the cache
		changes, err := d.Decode(nil, "example", nil, msg)
		if err != nil {
			t.Fatal(err)
		}
		if r, w := render(changes), render(before); r != w {
			t.Fatalf("decode %d differs from the decoder without the cache:\n%s\nwant\n%s", i, r, w)
		}
	}
}

// canalTypesText is the mysqlType and sqlType of table n of cols
// columns: distinct text per table, with an ENUM's labels.
func canalTypesText(n, cols int) (mysqlTypes, sqlTypes []byte) {
	var m, s []string
	for i := range cols {
		m = append(m, fmt.Sprintf(`"c%d_%d":"enum('a%d','b','c')"`, n, i, n))
		s = append(s, fmt.Sprintf(`"c%d_%d":4`, n, i))
	}
	return []byte("{" + strings.Join(m, ",") + "}"), []byte("{" + strings.Join(s, ",") + "}")
}

// The cache holds no more than its bound however many tables' types it
// is given (3,000 tables, each in schema versions), and what it returns
// is what parsing the text returns.
func TestCanalTypeCacheBounded(t *testing.T) {
	m, s := canalTypesText(0, 8)
	one := entrySize(&canalTypesEntry{mysqlTypes: m, sqlTypes: s, cols: canalTypes(m, s)})
	c := newCanalTypeCache(10 * one)
	for n := range 3000 {
		m, s := canalTypesText(n, 8)
		if got, want := c.types(m, s), canalTypes(m, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("table %d: %+v, want %+v", n, got, want)
		}
		c.mu.RLock()
		size, entries := 0, len(c.entries)
		for _, e := range c.entries {
			size += entrySize(e)
		}
		counted := c.size
		c.mu.RUnlock()
		if size != counted || size > c.max {
			t.Fatalf("after table %d: %d entries of %d bytes (counted %d), bound %d", n, entries, size, counted, c.max)
		}
	}
	// A text larger than the bound is parsed, not kept.
	big, bigSQL := canalTypesText(-1, 100)
	if got, want := c.types(big, bigSQL), canalTypes(big, bigSQL); !reflect.DeepEqual(got, want) {
		t.Fatalf("big: %+v, want %+v", got, want)
	}
	for _, e := range c.entries {
		if string(e.mysqlTypes) == string(big) {
			t.Fatalf("a text of %d bytes kept in a cache of %d", len(big), c.max)
		}
	}
	// The columns point into the cache's copy, not into the caller's
	// buffer, which the caller reuses for the next record.
	m, s = canalTypesText(5000, 2)
	cols := c.types(m, s)
	for i := range m {
		m[i] = 'x'
	}
	if string(cols[0].name) != "c5000_0" || string(cols[0].source) != "enum('a5000','b','c')" {
		t.Fatalf("a column reads the caller's buffer: %q %q", cols[0].name, cols[0].source)
	}
}

// Decoders sharing a cache, each decoding in several goroutines the
// messages of more tables than the cache holds (so that entries are
// added and evicted while others are read), write what a decoder without
// the cache writes. Run with -race.
func TestCanalTypeCacheConcurrent(t *testing.T) {
	const tables = 40
	msgs := make([][]byte, tables)
	want := make([]string, tables)
	uncached, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	uncached.canalTypes = nil
	for n := range tables {
		m, s := canalTypesText(n, 4)
		msgs[n] = []byte(fmt.Sprintf(`{"data":[{"c%d_0":"1","c%d_1":"2","c%d_2":"3","c%d_3":"0"}],"database":"test","es":1,"id":1,"isDdl":false,`+
			`"mysqlType":%s,"old":null,"pkNames":[],"sql":"","sqlType":%s,"table":"t%d","ts":1,"type":"INSERT"}`, n, n, n, n, m, s, n))
		changes, err := uncached.Decode(nil, "example", nil, msgs[n])
		if err != nil {
			t.Fatal(err)
		}
		want[n] = render(changes)
	}
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	m, s := canalTypesText(0, 4)
	d.canalTypes = newCanalTypeCache(tables / 4 * entrySize(&canalTypesEntry{mysqlTypes: m, sqlTypes: s, cols: canalTypes(m, s)}))
	decoders := []*Decoder{d, d.Fresh()}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			dec := decoders[g%len(decoders)]
			var changes []Change
			for i := range 500 {
				n := (g*7 + i) % tables
				var err error
				if changes, err = dec.Decode(changes[:0], "example", nil, msgs[n]); err != nil {
					errs <- err
					return
				}
				if got := render(changes); got != want[n] {
					errs <- fmt.Errorf("table %d:\n%s\nwant\n%s", n, got, want[n])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	d.canalTypes.mu.RLock()
	defer d.canalTypes.mu.RUnlock()
	if d.canalTypes.size > d.canalTypes.max {
		t.Errorf("cache holds %d bytes, bound %d", d.canalTypes.size, d.canalTypes.max)
	}
}
