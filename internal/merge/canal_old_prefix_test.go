package merge

import (
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// canalKeyMsg is a Canal flat message of test.orders, whose primary key
// is (a, b).
func canalKeyMsg(typ string, es, batch int, data, old string) string {
	if old == "" {
		old = "null"
	}
	return `{"data":` + data + `,"database":"test","es":` + strconv.Itoa(es) + `,"id":` + strconv.Itoa(batch) +
		`,"isDdl":false,"mysqlType":{"a":"int(11)","b":"int(11)","name":"varchar(255)"},"old":` + old +
		`,"pkNames":["a","b"],"sql":"","sqlType":{"a":4,"b":4,"name":12},"table":"orders","ts":` + strconv.Itoa(es) + `,"type":"` + typ + `"}`
}

// Canal's flat message gathers the changed columns of an UPDATE's rows in
// one set for the whole message (MQMessageUtils.messageConverter declares
// updateSet before its loop over the rows, and each row's old entry holds
// its before values of every column in the set): a row is left out of old
// only while no row before it, nor itself, changed a column Canal sends,
// so the rows left out are the first ones, and a later row's entry holds
// the columns earlier rows changed, with its own (maybe unchanged)
// values. Here, with canal.instance.filter.field leaving out the column
// row (1,5) changed, row (2,1) moves to (2,7) and row (3,9) changes its
// name: old is [{"b":"1"},{"b":"9","name":"z"}]. Its first entry is row
// (2,7)'s: paired with row (1,5), the model deleted (1,1), a row the
// statement never touched, and kept (2,1), which the source no longer has.
func TestCanalOldEntriesAreTheLastRowsOfTheMessage(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalKeyMsg("INSERT", 1589373560000, 1,
		`[{"a":"1","b":"1","name":"w"},{"a":"1","b":"5","name":"x"},{"a":"2","b":"1","name":"y"},{"a":"3","b":"9","name":"z"}]`, ""))
	l.raw(0, "example", canalKeyMsg("UPDATE", 1589373561000, 2,
		`[{"a":"1","b":"5","name":"x"},{"a":"2","b":"7","name":"y"},{"a":"3","b":"9","name":"z2"}]`,
		`[{"b":"1"},{"b":"9","name":"z"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT a, b, name FROM cdc_test_orders ORDER BY a, b`, "1|1|w", "1|5|x", "2|7|y", "3|9|z2")
}
