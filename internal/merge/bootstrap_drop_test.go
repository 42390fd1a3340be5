package merge

import (
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// Maxwell's bootstrap rows carry no binlog position (BootstrapController
// writes none), so they sorted before every position, and below a
// table-drop's position, which is a floor for the table's later changes:
// a table dropped, made again with rows the binlog did not carry (a
// restore with sql_log_bin=0) and bootstrapped lost every bootstrap row
// for good. A change without a position is ordered against a truncation
// by Kafka order in its partition, as changes at the truncation's own
// position are: a bootstrap row after the drop stays, one before it goes,
// whether they are merged with the drop or apart.
func TestMaxwellBootstrapAfterTableDropKeepsItsRows(t *testing.T) {
	for _, split := range []bool{false, true} {
		l := newFormatLoader(t, cdc.FormatMaxwell)
		l.raw(0, "maxwell", maxwellOrders("bootstrap-insert", "", `{"id":9,"name":"before the drop"}`))
		l.raw(0, "maxwell", maxwellOrders("insert", "binlog.000001:100", `{"id":1,"name":"a"}`))
		l.raw(0, "maxwell", maxwellOrders("insert", "binlog.000001:110", `{"id":2,"name":"b"}`))
		if split {
			l.flush()
			l.mustMerge()
		}
		l.raw(0, "maxwell", maxwellOrders("table-drop", "binlog.000001:200", ""))
		if split {
			l.flush()
			l.mustMerge()
		}
		l.raw(0, "maxwell", maxwellOrders("bootstrap-start", "", ""))
		l.raw(0, "maxwell", maxwellOrders("bootstrap-insert", "", `{"id":2,"name":"b2"}`))
		l.raw(0, "maxwell", maxwellOrders("bootstrap-insert", "", `{"id":3,"name":"c"}`))
		l.raw(0, "maxwell", maxwellOrders("bootstrap-complete", "", ""))
		if split {
			l.flush()
			l.mustMerge()
		}
		l.raw(0, "maxwell", maxwellOrders("update", "binlog.000001:300", `{"id":3,"name":"c2"}`))
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "2|b2", "3|c2")
	}
}
