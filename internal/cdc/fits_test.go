package cdc

import (
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
)

// A value written as its type's text but beyond what the changelog
// column holds used to fail the load of every table at each retry, or
// (a decimal's extra fraction digits) be rounded by the cast.
func TestColumnFits(t *testing.T) {
	f := func(typ schema.Type, precision, scale int, value string, fits bool) {
		t.Helper()
		c := Column{Name: "c", Type: typ, Precision: precision, Scale: scale}
		if value != "" {
			c.Value = []byte(value)
		}
		if err := c.Fits(); (err == nil) != fits {
			t.Errorf("%v(%d,%d) %s: Fits() = %v, want fits %v", typ, precision, scale, value, err, fits)
		}
	}
	f(schema.Int32, 0, 0, "2147483647", true)
	f(schema.Int32, 0, 0, "-2147483648", true)
	f(schema.Int32, 0, 0, "2147483648", false)
	f(schema.Int32, 0, 0, "3000000000", false)
	f(schema.Int64, 0, 0, "9223372036854775807", true)
	f(schema.Int64, 0, 0, "18446744073709551615", false)
	f(schema.Timestamp, 0, 0, "1700000000000000", true)
	f(schema.Timestamp, 0, 0, "9223372036854775806", true)
	f(schema.Timestamp, 0, 0, "9223372036854775807", true)  // infinity
	f(schema.Timestamp, 0, 0, "-9223372036854775807", true) // -infinity
	f(schema.Timestamp, 0, 0, "-9223372036854775808", false)
	f(schema.Timestamp, 0, 0, "-9223372022400000001", false)
	f(schema.Float64, 0, 0, "1.5e300", true)
	f(schema.Float64, 0, 0, `"NaN"`, true)
	f(schema.Float64, 0, 0, "1e400", false)
	f(schema.Decimal, 5, 2, `"999.99"`, true)
	f(schema.Decimal, 5, 2, `"-999.99"`, true)
	f(schema.Decimal, 5, 2, `"0999.990"`, true)
	f(schema.Decimal, 5, 2, `"1000.00"`, false)
	f(schema.Decimal, 10, 2, `"1.239"`, false)
	f(schema.Decimal, 20, 0, `"18446744073709551615"`, true)
	f(schema.Decimal, 0, 0, `"123456789012345678901234567890123456789012.5"`, true) // unknown precision: text
	f(schema.Decimal, 40, 2, `"1.239"`, true)                                       // beyond DECIMAL: text
	f(schema.String, 0, 0, `"x"`, true)
	f(schema.Int32, 0, 0, "", true) // null
	f(schema.String, 0, 0, `"\ud83d\ude00 \\ud800 \"\n"`, true)
	f(schema.String, 0, 0, `"\ud800x"`, false)
	f(schema.String, 0, 0, `"\udc00"`, false)
	f(schema.String, 0, 0, `"\ud800\u0041"`, false)
	f(schema.String, 0, 0, `"x\ud800"`, false)
	f(schema.JSON, 0, 0, `{"a":["\ud800"]}`, false)
	f(schema.String, 0, 0, "\"\xff\xfe\"", false)
	f(schema.String, 0, 0, `"é 订单"`, true)
}

// An integer column given a number with a fraction (a changelog column
// typed integer by the source's schema, Debezium's int32 or int64) is
// dead-lettered, never rounded, and the reason says why: it said the
// value was out of the range of the integer, which 1.5 is not.
func TestColumnFitsSaysAFractionIsNoInteger(t *testing.T) {
	for _, typ := range []schema.Type{schema.Int32, schema.Int64} {
		c := Column{Name: "c", Type: typ, Value: []byte("1.5")}
		err := c.Fits()
		if err == nil || err.Error() != "1.5 is not an integer: an integer column would round it" {
			t.Errorf("%v 1.5: Fits() = %v, want it refused as no integer", typ, err)
		}
	}
}
