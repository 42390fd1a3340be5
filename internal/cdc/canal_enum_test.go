package cdc

import (
	"strings"
	"testing"
)

// canalValue decodes a Canal INSERT of test.orders whose column e has
// mysqlType (a JSON string) and value (Canal's JSON string, or null), and
// returns e as render writes it ("e String enum('a') = \"a\""), and e.
func canalValue(t *testing.T, mysqlType, value string) (string, Column, error) {
	t.Helper()
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	msg := `{"data":[{"id":"1","e":` + value + `}],"database":"test","es":1589373560000,"id":4,"isDdl":false,` +
		`"mysqlType":{"id":"bigint(20)","e":` + mysqlType + `},"old":null,"pkNames":["id"],"sql":"","sqlType":{"id":-5,"e":4},"table":"orders","ts":1589373560798,"type":"INSERT"}`
	got, err := d.Decode(nil, "example", nil, []byte(msg))
	if err != nil {
		return "", Column{}, err
	}
	return strings.TrimSpace(strings.Split(render(got), "\n")[2]), got[0].Columns[1], nil
}

// Canal's ENUM index and SET mask become their labels (canal_enum_set.txt);
// these are the edges: MySQL's error value (index 0), a numeric label, a
// value that is a label already, an index past the labels (refused: which
// label it is is not known).
func TestCanalEnumAndSetValues(t *testing.T) {
	f := func(mysqlType, value, want string) {
		t.Helper()
		got, _, err := canalValue(t, mysqlType, value)
		if want == "" {
			if err == nil {
				t.Errorf("%s %s: taken as %s, want an error", mysqlType, value, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s %s: %v", mysqlType, value, err)
		}
		if !strings.HasSuffix(got, " = "+want) {
			t.Errorf("%s %s: %s, want = %s", mysqlType, value, got, want)
		}
	}
	f(`"enum('a','b')"`, `"0"`, `""`)
	f(`"enum('0','1')"`, `"1"`, `"0"`)
	f(`"ENUM('A', 'b,c')"`, `"2"`, `"b,c"`)
	// A type as its DDL wrote it (Canal's table meta applies the DDL it
	// reads, Druid keeping the type name's case) longer than 64 bytes, as
	// an ENUM's or SET's labels soon are: its name was not read without
	// regard to case, and its index was stored as text.
	f(`"ENUM('small','medium','large','extra large','extra extra large','huge')"`, `"2"`, `"medium"`)
	f(`"SET('read','write','execute','delete','administer','audit','impersonate')"`, `"5"`, `"read,execute"`)
	f(`"enum('a','b')"`, `"b"`, `"b"`)
	f(`"enum('a','b')"`, `null`, `null`)
	f(`"enum('a','b')"`, `"3"`, "")
	// Canal's mysqlType is Druid's rendering of SHOW CREATE TABLE
	// (TableMetaCache.getTableMetaByDB, MemoryTableMeta.processTableElement:
	// each label's SQLCharExpr.toString, SQLASTOutputVisitor.printChars):
	// Druid's lexer has undone MySQL's escapes, and it doubles a quote and
	// writes every other character as it is. The labels here are C:\new
	// and x; a\\b and x; a\ and b. Read as MySQL's escapes, C:\new was
	// C:, a line break, ew, and the quote after a\ was taken as escaped,
	// so no label was read and the index stayed.
	f(`"enum('C:\\new','x')"`, `"1"`, `"C:\\new"`)
	f(`"enum('a\\\\b','x')"`, `"1"`, `"a\\\\b"`)
	f(`"enum('a\\\\b','x')"`, `"2"`, `"x"`)
	f(`"enum('a\\','b')"`, `"2"`, `"b"`)
	f(`"set('a\\','b')"`, `"3"`, `"a\\,b"`)
	f(`"set('a','b')"`, `"3"`, `"a,b"`)
	f(`"set('a','b')"`, `"4"`, "")
}
