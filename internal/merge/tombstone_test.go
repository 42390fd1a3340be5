package merge

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tombstone queues the tombstone Debezium sends after a delete: the key,
// a null value, on the topic of the changes queued next.
func (l *changeLoader) tombstone(p int32, key string) { l.keyed(p, key, nil) }

// keyed queues a record of key and value on partition p, on the topic of
// the changes queued next.
func (l *changeLoader) keyed(p int32, key string, value []byte) {
	l.pending[p] = append(l.pending[p], &kgo.Record{Topic: l.topic, Partition: p, Offset: l.next[p], Key: []byte(key), Value: value})
	l.next[p]++
}

// A Debezium topic compacted by Kafka can hold a deleted row's tombstone
// without its delete (the cleaner keeps a key's latest record): a
// consumer behind the cleaner, which loaded the row before, reads only the
// tombstone. Tombstones were dropped, and the row stayed in the model for
// good. A tombstone right after its delete changes nothing, in one merge
// or apart, and a change of its key after it applies.
func TestDebeziumTombstoneDeletesTheRowOfItsKey(t *testing.T) {
	t.Run("after its delete", func(t *testing.T) {
		for _, split := range []bool{false, true} {
			l := newChangeLoader(t)
			l.topic = "dbserver1.db.orders"
			l.change(0, "orders", "c", 100, row(1, "a"), "id")
			l.change(0, "orders", "c", 110, row(2, "b"), "id")
			l.change(0, "orders", "d", 200, row(1, "a"), "id")
			if split {
				l.flush()
				l.mustMerge()
			}
			l.tombstone(0, `{"id":1}`)
			l.flush()
			l.mustMerge()
			l.want(`SELECT id, v FROM cdc_db_orders`, "2|b")
			l.want(`SELECT id FROM cdc_db_orders_tombstones`, "1")
			l.change(0, "orders", "c", 300, row(1, "again"), "id")
			l.flush()
			l.mustMerge()
			l.want(`SELECT id, v FROM cdc_db_orders`, "1|again", "2|b")
		}
	})
	t.Run("alone after compaction", func(t *testing.T) {
		l := newChangeLoader(t)
		l.topic = "dbserver1.db.orders"
		l.change(0, "orders", "c", 100, row(1, "a"), "id")
		l.change(0, "orders", "c", 110, row(2, "b"), "id")
		l.flush()
		l.mustMerge()
		l.next[0]++ // the delete of id 1, compacted away before it was read
		l.tombstone(0, `{"id":1}`)
		l.change(0, "orders", "u", 300, row(2, "b2"), "id")
		l.flush()
		l.mustMerge()
		l.want(`SELECT id, v FROM cdc_db_orders`, "2|b2")
	})
}

// A tombstone on a Debezium table's topic whose key is not the table's
// (another producer's, {"order_id":1} beside Debezium's {"id":…}) was
// taken for a delete of a key of its own: the changelog table grew the
// column, and the merge, seeing the table's key change, stopped merging
// the model for good, every later change of the table left out of it.
// Such a tombstone deletes nothing, as one of a table not known.
func TestDebeziumTombstoneOfAnotherKeyDeletesNothing(t *testing.T) {
	l := newChangeLoader(t)
	l.topic = "dbserver1.db.orders"
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	l.tombstone(0, `{"order_id":1}`)
	l.change(0, "orders", "c", 200, row(2, "b"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a", "2|b")
}
