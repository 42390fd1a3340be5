package merge

import "testing"

// Kafka Connect's key and value converters are configured apart: a
// connector whose values carry their schema (an INT id typed INTEGER)
// and whose keys do not (key.converter.schemas.enable=false) writes a
// tombstone's key as bare JSON, whose integer is inferred as a BIGINT.
// The tombstone widened the changelog table's and the model's key column
// to BIGINT, a type the source never had; an integer that fits the
// column is taken as the column's type.
func TestDebeziumTombstoneWithoutKeySchemaKeepsTheKeyType(t *testing.T) {
	l := newChangeLoader(t)
	l.topic = "dbserver1.db.orders"
	v := `{"schema":{"type":"struct","fields":[{"type":"struct","optional":true,"field":"before","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"v"}]},` +
		`{"type":"struct","optional":true,"field":"after","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"v"}]}]},` +
		`"payload":{"before":null,"after":{"id":1,"v":"a"},"source":{"connector":"mysql","name":"dbserver1","db":"db","table":"orders","file":"mysql-bin.000001","pos":100,"ts_ms":1700000000000},"op":"c","ts_ms":1700000000000}}`
	l.keyed(0, `{"id":1}`, []byte(v))
	l.flush()
	l.mustMerge()
	l.tombstone(0, `{"id":1}`)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id FROM cdc_db_orders`)
	l.want(`SELECT table_name, data_type FROM information_schema.columns WHERE table_name IN ('cdc_db_orders', 'cdc_db_orders_log') AND column_name = 'id'`,
		"cdc_db_orders_log|INTEGER", "cdc_db_orders|INTEGER")
}
