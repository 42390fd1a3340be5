package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCheck(t *testing.T) {
	f := func(name string, value []byte, wantOK bool) {
		t.Helper()
		p := Check(value)
		if p.OK() != wantOK {
			t.Errorf("%s: Check = %+v, want ok=%v", name, p, wantOK)
		}
	}
	f("empty (tombstone)", nil, true)
	f("object", []byte(`{"a":1}`), true)
	f("big numbers", []byte(`{"i":1234567890123456789012345678901234567890,"d":0.123456789012345678901234567890}`), true)
	f("pretty", []byte("{\n  \"a\": [1,\n 2]\n}\n"), true)
	f("top-level array", []byte(`[1,2,3]`), true)
	f("top-level string", []byte(`"hi"`), true)
	f("top-level number", []byte(`42`), true)
	f("duplicate keys", []byte(`{"a":1,"a":2}`), true)
	f("unicode and escapes", []byte(`{"s":"日本 \u00e9 \"q\" \\ \n","e":"😀"}`), true)
	f("invalid json", []byte(`{"a":`), false)
	f("trailing garbage", []byte(`{"a":1} x`), false)
	f("NaN", []byte(`{"a":NaN}`), false)
	f("single quotes", []byte(`{'a':1}`), false)
	f("invalid utf8", []byte("{\"a\":\"\xff\xfe\"}"), false)
	f("plain text", []byte("hello"), false)
	f("deep nesting within limit", []byte(strings.Repeat("[", 500)+strings.Repeat("]", 500)), true)
	f("deep nesting over limit", []byte(strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1)), false)
	f("brackets inside strings do not count", []byte(`{"s":"`+strings.Repeat("[", 5000)+`"}`), true)
}

func TestCheckReasonNamesTheProblem(t *testing.T) {
	if r := Check([]byte("{\"a\":\"x\xff\"}")); !strings.Contains(r.Reason, "UTF-8 at byte 7") || r.Kind != KindInvalidUTF8 {
		t.Errorf("reason %q does not give the byte of the bad UTF-8", r)
	}
	if r := Check([]byte(`{"a":`)); !strings.Contains(r.Reason, "invalid JSON") || r.Kind != KindInvalidJSON {
		t.Errorf("reason %q does not say invalid JSON", r)
	}
}

func record(value []byte) *kgo.Record {
	return &kgo.Record{
		Topic: "llm-traces", Partition: 3, Offset: 1234567,
		Key:       []byte("trace-1"),
		Value:     value,
		Timestamp: time.Date(2026, 8, 10, 10, 0, 0, 123e6, time.UTC),
		Headers:   []kgo.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "bin", Value: []byte{0xff, 0}}},
	}
}

func TestAppendRawRowRoundTrip(t *testing.T) {
	values := [][]byte{
		[]byte(`{"i":1234567890123456789012345678901234567890,"d":0.123456789012345678901234567890}`),
		[]byte("{\n  \"pretty\": true,\n\t\"tab\": \"\\t\"\n}"),
		[]byte(`"top-level string with \"quotes\" and 日本"`),
		[]byte(`{"ctl":"` + "\\u0001" + `"}`),
		nil,
	}
	var id [16]byte
	NewUUIDs().Next(&id)
	for _, v := range values {
		line := AppendRawRow(nil, record(v), &id, ValueText)
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("row is not one NDJSON line: %q", line)
		}
		var row struct {
			UUID     string          `json:"uuid"`
			Offset   int64           `json:"koffset"`
			Part     int32           `json:"kpartition"`
			RawData  *string         `json:"raw_data"`
			Metadata json.RawMessage `json:"record_metadata"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("row %q is not JSON: %v", line, err)
		}
		if v == nil {
			if row.RawData != nil {
				t.Errorf("tombstone: raw_data = %q, want null", *row.RawData)
			}
		} else if row.RawData == nil || *row.RawData != string(v) {
			t.Errorf("raw_data changed:\n got %v\nwant %q", row.RawData, v)
		}
		if row.Offset != 1234567 || row.Part != 3 || len(row.UUID) != 36 || row.UUID[14] != '4' {
			t.Errorf("coordinates or uuid wrong: %+v", row)
		}
		var md struct {
			Topic      string  `json:"topic"`
			Partition  int32   `json:"partition"`
			Offset     int64   `json:"offset"`
			Key        *string `json:"key"`
			CreateTime string  `json:"create_time"`
			Headers    []struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			} `json:"headers"`
		}
		if err := json.Unmarshal(row.Metadata, &md); err != nil {
			t.Fatal(err)
		}
		if md.Topic != "llm-traces" || md.Partition != 3 || md.Offset != 1234567 || *md.Key != "trace-1" ||
			md.CreateTime != "2026-08-10T10:00:00.123Z" || len(md.Headers) != 2 {
			t.Errorf("metadata wrong: %s", row.Metadata)
		}
	}
}

func TestMetadataBinaryKeyAndHeader(t *testing.T) {
	r := record([]byte(`{}`))
	r.Key = []byte{0xde, 0xad, 0xbe, 0xef}
	md := AppendMetadata(nil, r)
	var m map[string]any
	if err := json.Unmarshal(md, &m); err != nil {
		t.Fatalf("%s: %v", md, err)
	}
	if m["key"] != base64.StdEncoding.EncodeToString(r.Key) || m["key_encoding"] != "base64" {
		t.Errorf("binary key not base64 with key_encoding: %s", md)
	}
	h := m["headers"].([]any)[1].(map[string]any)
	if h["value"] != base64.StdEncoding.EncodeToString([]byte{0xff, 0}) || h["value_encoding"] != "base64" {
		t.Errorf("binary header not base64: %s", md)
	}
	r.Key = nil
	if md := AppendMetadata(nil, r); !bytes.Contains(md, []byte(`"key":null`)) {
		t.Errorf("nil key not null: %s", md)
	}
}

func TestAppendDLQRowKeepsOriginalBytes(t *testing.T) {
	bad := []byte("not json \xff\x00 at all")
	line := AppendDLQRow(nil, record(bad), "invalid JSON", StageDecode)
	var row struct {
		Topic  string `json:"topic"`
		Offset int64  `json:"offset"`
		Value  string `json:"value"`
		Error  string `json:"error"`
		Stage  string `json:"stage"`
	}
	if err := json.Unmarshal(line, &row); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	got, _ := base64.StdEncoding.DecodeString(row.Value)
	if !bytes.Equal(got, bad) || row.Error != "invalid JSON" || row.Stage != "decode" || row.Offset != 1234567 {
		t.Errorf("DLQ row wrong: %s", line)
	}
}

func TestCheckObject(t *testing.T) {
	for v, want := range map[string]bool{`{"a":1}`: true, " \n{}": true, `[1]`: false, `"s"`: false, ``: false} {
		if got := CheckObject([]byte(v)).OK(); got != want {
			t.Errorf("CheckObject(%q) ok = %v, want %v", v, got, want)
		}
	}
}

func TestUUIDsUnique(t *testing.T) {
	g := NewUUIDs()
	seen := map[[16]byte]bool{}
	var id [16]byte
	for range 100000 {
		g.Next(&id)
		if seen[id] {
			t.Fatal("duplicate uuid")
		}
		seen[id] = true
	}
}

// ValueJSON embeds the value as JSON on one line: line breaks between
// tokens go, everything else (number text, escapes, spaces) stays.
func TestAppendRawRowValueJSON(t *testing.T) {
	cases := []struct{ value, want string }{
		{`{"i":1234567890123456789012345678901234567890,"d":0.123456789012345678901234567890}`,
			`{"i":1234567890123456789012345678901234567890,"d":0.123456789012345678901234567890}`},
		{"{\n  \"pretty\": 1e400,\r\n\t\"s\": \"a\\nb\"\n}", `{"pretty":1e400,"s":"a\nb"}`},
		{`[1, "two",  3]`, `[1, "two",  3]`},
		{`"日本\u2028"`, `"日本\u2028"`},
		{"", "null"},
	}
	var id [16]byte
	for _, c := range cases {
		line := AppendRawRow(nil, record([]byte(c.value)), &id, ValueJSON)
		if bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("row is not one NDJSON line: %q", line)
		}
		var row struct {
			RawData json.RawMessage `json:"raw_data"`
		}
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatalf("row %q is not JSON: %v", line, err)
		}
		if string(row.RawData) != c.want {
			t.Errorf("raw_data of %q = %s, want %s", c.value, row.RawData, c.want)
		}
	}
}

// A delimited row is one line of six fields; the value is in the fourth
// as it came, or, when it has a line break, in the fifth as a JSON string.
func TestAppendDelimitedRow(t *testing.T) {
	cases := []struct {
		value          string
		verbatim, text string // the two value fields
	}{
		{`{"i":1234567890123456789012345678901234567890,"d":1.50}`, `{"i":1234567890123456789012345678901234567890,"d":1.50}`, ""},
		{" \t[1, \"two\",  3] ", " \t[1, \"two\",  3] ", ""},
		{`"a \"quoted\" string, \u001f and 日本"`, `"a \"quoted\" string, \u001f and 日本"`, ""},
		{"{\n  \"pretty\": 1e400\r\n}", "", `"{\n  \"pretty\": 1e400\r\n}"`},
		{"", "", ""},
	}
	var id [16]byte
	NewUUIDs().Next(&id)
	for _, c := range cases {
		r := record([]byte(c.value))
		line := AppendRawRow(nil, r, &id, ValueVerbatim)
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("row is not one line: %q", line)
		}
		fields := strings.Split(string(line[:len(line)-1]), string(rune(FieldSeparator)))
		if len(fields) != 6 {
			t.Fatalf("row %q has %d fields, want 6", line, len(fields))
		}
		want := []string{string(AppendUUID(nil, &id)), "1234567", "3", c.verbatim, c.text, string(AppendMetadata(nil, r))}
		for i := range want {
			if fields[i] != want[i] {
				t.Errorf("value %q: field %d = %q, want %q", c.value, i, fields[i], want[i])
			}
		}
		if c.text != "" {
			var back string
			if err := json.Unmarshal([]byte(c.text), &back); err != nil || back != c.value {
				t.Errorf("quoted value %s reads back as %q (%v), want %q", c.text, back, err, c.value)
			}
		}
	}
}

// TestVerbatim puts every byte value at every position of strings long
// enough to take the word-at-a-time path, after every kind of plain
// prefix: the run Verbatim reports ends exactly at the first byte a JSON
// string must escape (or, ascii, at the first above 0x7F).
func TestVerbatim(t *testing.T) {
	for _, ascii := range []bool{false, true} {
		for n := range 20 {
			for at := range n {
				for c := range 256 {
					s := []byte(strings.Repeat("a~ !#[]}", 3)[:n])
					s[at] = byte(c)
					stops := c < 0x20 || c == '"' || c == '\\' || ascii && c >= 0x80
					want := n
					if stops {
						want = at
					}
					if got := Verbatim(string(s), ascii); got != want {
						t.Fatalf("Verbatim(%q, ascii %v) = %d, want %d", s, ascii, got, want)
					}
					if got := Verbatim(s, ascii); got != want {
						t.Fatalf("Verbatim([]byte %q, ascii %v) = %d, want %d", s, ascii, got, want)
					}
				}
			}
		}
	}
}

// TestAppendStringRoundTrips escapes strings with every ASCII byte at every
// position of the first words, and JSON documents (a quote every few
// bytes): each reads back as the same string.
func TestAppendStringRoundTrips(t *testing.T) {
	var inputs []string
	for n := range 20 {
		for at := range n {
			for c := range 0x80 {
				s := []byte(strings.Repeat(`ab"\x`, 4)[:n])
				s[at] = byte(c)
				inputs = append(inputs, string(s))
			}
		}
	}
	inputs = append(inputs, `{"model":"gpt-4o","usage":{"input_tokens":12},"text":"line\nnext\ttab \\ \u00e9\u2028"}`,
		strings.Repeat(`"`, 17), strings.Repeat("\x01", 9)+"é")
	for _, s := range inputs {
		out := AppendString([]byte("prefix"), s)
		if !bytes.HasPrefix(out, []byte("prefix")) {
			t.Fatalf("%q: the bytes before were changed: %q", s, out)
		}
		var back string
		if err := json.Unmarshal(out[len("prefix"):], &back); err != nil || back != s {
			t.Fatalf("%q escaped as %s, read back as %q (%v)", s, out[len("prefix"):], back, err)
		}
	}
}

// AppendUTC writes what the time package's layout writes for the same
// instant, with 3, 6 and 9 fractional digits: around day boundaries, leap
// days and the century rules, and at random instants up to 9999.
func TestAppendUTC(t *testing.T) {
	secs := []int64{0, 1, 59, 86_399, 86_400, 253_402_300_799}
	for _, day := range []string{"1972-02-29", "1999-12-31", "2000-02-29", "2000-03-01", "2024-02-29",
		"2100-02-28", "2100-03-01", "2400-02-29", "9999-12-31"} {
		d, err := time.Parse(time.DateOnly, day)
		if err != nil {
			t.Fatal(err)
		}
		secs = append(secs, d.Unix(), d.Unix()-1, d.Unix()+45_296)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		secs = append(secs, r.Int64N(253_402_300_800))
	}
	for _, sec := range secs {
		for _, f := range []struct {
			digits     int
			unit, frac uint64 // nanoseconds of one unit of the fraction, units in a second
			layout     string
		}{{3, 1e6, 1e3, "2006-01-02T15:04:05.000Z"}, {6, 1e3, 1e6, "2006-01-02T15:04:05.000000Z"},
			{9, 1, 1e9, "2006-01-02T15:04:05.000000000Z"}} {
			frac := r.Uint64N(f.frac)
			want := time.Unix(sec, int64(frac*f.unit)).UTC().Format(f.layout)
			if got := string(AppendUTC([]byte("x"), uint64(sec), frac, f.digits)); got != "x"+want {
				t.Fatalf("%d s + %d: %s, want x%s", sec, frac, got, want)
			}
		}
	}
}

// A record's create_time is its timestamp in UTC to the millisecond,
// also before 1970 (Kafka's -1 for none) and past 9999.
func TestMetadataCreateTime(t *testing.T) {
	for _, ts := range []time.Time{time.UnixMilli(1_764_633_600_123), time.UnixMilli(-1), time.UnixMilli(0),
		time.Date(12000, 1, 2, 3, 4, 5, 6e6, time.UTC), time.Date(2026, 12, 2, 1, 0, 0, 0, time.FixedZone("CET", 3600))} {
		var md struct {
			CreateTime string `json:"create_time"`
		}
		if err := json.Unmarshal(AppendMetadata(nil, &kgo.Record{Topic: "t", Timestamp: ts}), &md); err != nil {
			t.Fatal(err)
		}
		if want := ts.UTC().Format("2006-01-02T15:04:05.000Z07:00"); md.CreateTime != want {
			t.Errorf("%v: create_time %s, want %s", ts, md.CreateTime, want)
		}
	}
}

// A dead letter's headers and create_time read back (ParseHeaders, the
// create_time string) into the record whose record_metadata is the
// original's: keys and values not UTF-8, a null value, repeated keys.
// A timestamp out of 0001-9999 is left out, not written as a string a
// database would refuse.
func TestDLQRowHeadersReadBack(t *testing.T) {
	r := &kgo.Record{Topic: "t", Offset: 3, Timestamp: time.UnixMilli(-1),
		Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("a")}, {Key: "\xff", Value: []byte{0xfe}}, {Key: "n"}, {Key: "n", Value: []byte{}}}}
	var row DLQRow
	if err := json.Unmarshal(AppendDLQRow(nil, r, "why", StageDecode), &row); err != nil {
		t.Fatal(err)
	}
	headers, err := ParseHeaders(row.Headers)
	if err != nil {
		t.Fatal(err)
	}
	if row.CreateTime == nil {
		t.Fatal("no create_time")
	}
	at, err := time.Parse(time.RFC3339Nano, *row.CreateTime)
	if err != nil {
		t.Fatal(err)
	}
	back := &kgo.Record{Topic: r.Topic, Offset: r.Offset, Headers: headers, Timestamp: at}
	if got, want := string(AppendMetadata(nil, back)), string(AppendMetadata(nil, r)); got != want {
		t.Errorf("record_metadata read back:\n got %s\nwant %s", got, want)
	}
	if headers[2].Value != nil || headers[3].Value == nil {
		t.Errorf("a null header value and an empty one: %q, %q; want nil and empty", headers[2].Value, headers[3].Value)
	}

	far := &kgo.Record{Topic: "t", Timestamp: time.UnixMilli(300_000_000_000_000)}
	var farRow DLQRow
	if err := json.Unmarshal(AppendDLQRow(nil, far, "why", StageDecode), &farRow); err != nil {
		t.Fatal(err)
	}
	if farRow.CreateTime != nil {
		t.Errorf("create_time %s for a timestamp past 9999, want none", *farRow.CreateTime)
	}
}
