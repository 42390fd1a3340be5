package merge

import (
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// Maxwell writes a FLOAT or DOUBLE column's value as Jackson writes a
// Java Float or Double (FloatColumnDef keeps ColumnDef.asJSON's value;
// JsonGenerator.writeNumber(double) is Double.toString), and a DECIMAL's
// as BigDecimal.toString: with an exponent below 10^-3 or from 10^7 up
// (1.23456789E7, 1.0E-4), and for a decimal of a large scale below 10^-6
// (1.00E-7); without one otherwise (12.5). Debezium's JsonConverter
// without schemas writes a float64 the same way. The numbers of one
// column therefore come with and without an exponent, and each must land
// as the number it is: the exponent once made the column DOUBLE and the
// others dead-lettered, or the other way round ("no type holds every
// value of both exactly").
func TestInferredNumbersWithAndWithoutExponentShareTheirColumn(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000000, `{"id":1,"price":12.5,"rate":1.0E7}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000001, `{"id":2,"price":1.23456789E7,"rate":3.25}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1700000002, `{"id":3,"price":-1.5E-4,"rate":1.00E-7}`, ""))
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_dlq`, "0")
	l.want(`SELECT id, price, rate FROM cdc_test_orders`,
		"1|12.5|10000000", "2|12345678.9|3.25", "3|-0.00015|0.000000100")
}

// A column that is DOUBLE already (typed so by a Debezium schema, or by a
// release that typed a number with an exponent as a double) takes the
// inferred numbers as the numbers they are, with an exponent or without:
// the text the source wrote them as reads back as the same double.
func TestInferredNumbersGoIntoADoubleColumnAsNumbers(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatDebezium)
	fs := []fld{{"id", "int32", "", ""}, {"rate", "float64", "", ""}}
	k, v := dbzEvent("t", "c", "mysql-bin.000001", 100, fs, "null", `{"id":1,"rate":1.0E7}`, fs[:1], `{"id":1}`)
	l.rawKey(0, "s.db.t", k, v)
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_db_t_log' AND column_name = 'rate'`, "DOUBLE")
	// The same connector with schemas off.
	l.rawKey(0, "s.db.t", `{"id":2}`, `{"before":null,"after":{"id":2,"rate":12.5},"source":{"db":"db","table":"t","file":"mysql-bin.000001","pos":110},"op":"c"}`)
	l.rawKey(0, "s.db.t", `{"id":3}`, `{"before":null,"after":{"id":3,"rate":1.5E-4},"source":{"db":"db","table":"t","file":"mysql-bin.000001","pos":120},"op":"c"}`)
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_dlq`, "0")
	l.want(`SELECT id, rate FROM cdc_db_t`, "1|1e+07", "2|12.5", "3|0.00015")
}
