package merge

import (
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// A MySQL BIGINT UNSIGNED key above 2^63 (a snowflake or hash id), which
// Maxwell and Debezium without schemas write as a bare JSON integer, was
// inferred as a decimal of unknown precision: text, which a key column of
// numbers may not become, so every change of such a row was dead-lettered
// and the model never held it. It is an integer of known digits, a
// DECIMAL(20,0) the BIGINT column widens to, numbers compared as numbers;
// a column outside the key already made text by a fraction takes it as
// its digits.
func TestInferredKeyAboveBigintStaysANumber(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	l.raw(0, "maxwell", maxwellMsg("insert", 1589373560, `{"id":1,"name":"a","price":1.5}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1589373561, `{"id":18446744073709551615,"name":"b","price":18446744073709551615}`, ""))
	l.raw(0, "maxwell", maxwellMsg("insert", 1589373562, `{"id":9223372036854775808,"name":"c","price":2}`, ""))
	l.raw(0, "maxwell", maxwellMsg("update", 1589373563, `{"id":9223372036854775808,"name":"c2","price":2}`, `{"name":"c"}`))
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_dlq`, "0")
	l.want(`SELECT id::VARCHAR, name, price FROM cdc_test_orders`, "18446744073709551615|b|18446744073709551615", "1|a|1.5", "9223372036854775808|c2|2") // sorted as text
	l.want(`SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_test_orders' AND column_name = 'id'`, "DECIMAL(20,0)")
}
