package merge

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink"
)

// raw queues a record of topic on partition p as it is.
func (l *changeLoader) raw(p int32, topic, value string) {
	l.pending[p] = append(l.pending[p], &kgo.Record{Topic: topic, Partition: p, Offset: l.next[p], Value: []byte(value)})
	l.next[p]++
}

// canalMsg is a Canal flat message of test.orders (id bigint key, name).
func canalMsg(typ string, es, batch int, data, old string) string {
	if old == "" {
		old = "null"
	}
	return `{"data":` + data + `,"database":"test","es":` + strconv.Itoa(es) + `,"id":` + strconv.Itoa(batch) +
		`,"isDdl":false,"mysqlType":{"id":"bigint(20)","name":"varchar(255)"},"old":` + old +
		`,"pkNames":["id"],"sql":"","sqlType":{"id":-5,"name":12},"table":"orders","ts":` + strconv.Itoa(es) + `,"type":"` + typ + `"}`
}

// An update of a row's primary key, as Canal sends it (one UPDATE whose
// data holds the new key and old the old one), leaves the model one row,
// of the new key: the old key's row goes with a delete the changelog
// holds before the update. Within one message, a key another row gives up
// is taken by the row that takes it later. Found by a review: the old
// key's row stayed in the model for good.
func TestCanalUpdateOfTheKeyLeavesNoRowOfTheOldKey(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalMsg("INSERT", 1589373560000, 1, `[{"id":"1","name":"a"},{"id":"3","name":"c"}]`, ""))
	// UPDATE orders SET id = id + 1 WHERE id IN (1, 3): 1 → 2, then 3 → 4.
	l.raw(0, "example", canalMsg("UPDATE", 1589373561000, 2, `[{"id":"2","name":"a"},{"id":"4","name":"c"}]`, `[{"id":"1"},{"id":"3"}]`))
	// Then 4 → 1, taking the key the first update gave up.
	l.raw(0, "example", canalMsg("UPDATE", 1589373562000, 3, `[{"id":"1","name":"c"}]`, `[{"id":"4"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "1|c", "2|a")
	l.want(`SELECT cdc_op, id, kindex FROM cdc_test_orders_log WHERE koffset = 1 ORDER BY kindex`, "d|1|0", "d|3|2", "u|2|1", "u|4|3") // sorted
}

// maxwellMsg is a Maxwell message of test.orders, keyed by id.
func maxwellMsg(typ string, ts int, data, old string) string {
	m := `{"database":"test","table":"orders","type":"` + typ + `","ts":` + strconv.Itoa(ts) + `,"xid":1,"data":` + data + `,"primary_key_columns":["id"]`
	if old != "" {
		m += `,"old":` + old
	}
	return m + `}`
}

// Maxwell sends an update of the key the same way (data and old).
func TestMaxwellUpdateOfTheKeyLeavesNoRowOfTheOldKey(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	l.raw(0, "maxwell", maxwellMsg("insert", 1589373560, `{"id":1,"name":"a"}`, ""))
	l.raw(0, "maxwell", maxwellMsg("update", 1589373561, `{"id":2,"name":"a"}`, `{"id":1}`))
	l.raw(0, "maxwell", maxwellMsg("update", 1589373562, `{"id":2,"name":"b"}`, `{"name":"a"}`)) // the key kept: no delete
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "2|b")
	l.want(`SELECT count(*) FILTER (cdc_op = 'd'), count(*) FROM cdc_test_orders_log`, "1|4")
}

// The old key's delete holds the key columns alone, which pass the checks
// of every column: an old value of another type in a column that is not
// the key (a MySQL JSON column that held "x") retypes nothing, and an old
// key of text in a key column of numbers is dead-lettered with its
// reason. Found by a review: the delete carried the whole old image,
// unchecked, and the load made a column of numbers text.
func TestKeyUpdateOldImageIsCheckedLikeTheRow(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	l.raw(0, "maxwell", maxwellMsg("insert", 1589373560, `{"id":1,"doc":5}`, ""))
	l.raw(0, "maxwell", maxwellMsg("update", 1589373561, `{"id":2,"doc":6}`, `{"id":1,"doc":"x"}`))
	l.flush()
	l.want(`SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_test_orders_log' AND column_name IN ('id', 'doc') ORDER BY column_name`, "BIGINT", "BIGINT")
	l.want(`SELECT cdc_op, id, coalesce(doc, 0) FROM cdc_test_orders_log`, "c|1|5", "d|1|0", "u|2|6")
	var b sink.Batch
	_, err := l.dec.AppendRows(&b, &kgo.Record{Topic: "maxwell", Value: []byte(maxwellMsg("update", 1589373562, `{"id":3,"doc":7}`, `{"id":"two"}`))})
	if err == nil || !strings.Contains(err.Error(), "column id of source table") {
		t.Fatalf("an old key of text in a key column of numbers: %v, want refused (dead-lettered)", err)
	}
}

// Canal's flat message leaves a row's entry out of old when none of its
// columns it sends changed (MQMessageUtils.messageConverter: "if
// (!rowOld.isEmpty()) old.add(rowOld)"), as for a row whose only change
// is in a column canal.instance.filter.field or filter.black.field
// leaves out: old then holds fewer entries than data, in the rows'
// order (the first rows: the changed columns are gathered in one set for
// the message, and a later row's entry holds each of them). Every row of
// such a message is a change, and a key that one of them gives up has no
// row left. Found by a hunt: the whole message was
// dead-lettered ("data has 2 rows but old has 1"), for good (a replay
// decodes it the same way), and its rows never reached the model.
func TestCanalUpdateWithRowsLeftOutOfOldKeepsEveryRow(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalMsg("INSERT", 1589373560000, 1, `[{"id":"1","name":"a"},{"id":"2","name":"b"},{"id":"5","name":"e"}]`, ""))
	// One statement: row 1 changed only a filtered column (no old
	// entry), row 2 moved from key 2 to 3, row 5 changed its name.
	l.raw(0, "example", canalMsg("UPDATE", 1589373561000, 2,
		`[{"id":"1","name":"a"},{"id":"3","name":"b"},{"id":"5","name":"f"}]`, `[{"id":"2"},{"id":"5","name":"e"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "1|a", "3|b", "5|f")
}

// With output_nulls=false Maxwell leaves a column whose value is NULL out
// of data (RowMap.writeMapToJSON skips a null unless includesNulls), but
// writes old with its nulls: an update that sets a column to NULL has the
// column in old and not in data. The row's column is NULL, and the
// update a change like any other. Found by a hunt: the message was
// dead-lettered ("old: column "name" is not in data") for good (a replay
// decodes it the same way), and the model kept the value the source no
// longer has.
func TestMaxwellUpdateToNullWithoutOutputNullsApplies(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	l.raw(0, "maxwell", maxwellMsg("insert", 1589373560, `{"id":1,"name":"a"}`, ""))
	l.raw(0, "maxwell", maxwellMsg("update", 1589373561, `{"id":1}`, `{"name":"a"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, coalesce(name, 'NULL') FROM cdc_test_orders ORDER BY id`, "1|NULL")
}
