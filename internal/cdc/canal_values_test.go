package cdc

import "testing"

// Values Canal writes in forms of its own, each valid at the source,
// were refused and their whole message dead-lettered (its rows missing
// from the model):
//   - a YEAR of 0, which MySQL keeps and shows as 0000, Canal writes
//     "0000" (RowsLogBuffer.fetchValue, MYSQL_TYPE_YEAR: value = "0000"
//     when the byte is 0), not an integer's text;
//   - a BIT(64) with its high bit set Canal writes as the unsigned number
//     (fetchValue, MYSQL_TYPE_BIT: getBeUlong64), beyond a BIGINT.
func TestCanalValuesInCanalsForms(t *testing.T) {
	f := func(mysqlType, value, want string) {
		t.Helper()
		got, col, err := canalValue(t, mysqlType, value)
		if err != nil {
			t.Errorf("%s %s: %v", mysqlType, value, err)
			return
		}
		if err := col.Fits(); err != nil {
			t.Errorf("%s %s: %s does not fit its column: %v", mysqlType, value, got, err)
		}
		if got != want {
			t.Errorf("%s %s: %s, want %s", mysqlType, value, got, want)
		}
	}
	f(`"year(4)"`, `"0000"`, `e Int32 year(4) = 0`)
	f(`"year"`, `"2155"`, `e Int32 year = 2155`)
	f(`"bit(64)"`, `"18446744073709551615"`, `e Decimal(20,0) bit(64) = "18446744073709551615"`)
	f(`"bit(8)"`, `"255"`, `e Int64 bit(8) = 255`)
}
