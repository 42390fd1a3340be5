package merge

import (
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// A change without a position on another partition than a table-drop is
// not ordered against it and stays in the model, "whichever merges the
// changes fall in" (README). Key 9 bootstrapped on two partitions (a
// bootstrap run twice, producer_partition_by random), one of them before
// the drop on the drop's partition: merged with the drop, the other
// partition's row stays; merged before the drop, the drop removes it,
// because the row a truncation removes is told by any change of its key
// at its position before the drop, not by the change the row came from.
func TestMaxwellBootstrapOnAnotherPartitionStaysWhicheverMerges(t *testing.T) {
	for _, split := range []bool{false, true} {
		l := newFormatLoader(t, cdc.FormatMaxwell)
		l.raw(0, "maxwell", maxwellOrders("insert", "binlog.000001:100", `{"id":1,"name":"a"}`))
		l.raw(0, "maxwell", maxwellOrders("bootstrap-insert", "", `{"id":9,"name":"p0"}`))
		l.raw(1, "maxwell", maxwellOrders("bootstrap-insert", "", `{"id":9,"name":"p1"}`))
		if split {
			l.flush()
			l.mustMerge()
		}
		l.raw(0, "maxwell", maxwellOrders("table-drop", "binlog.000001:200", ""))
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "9|p1")
	}
}
