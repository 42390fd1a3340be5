package cdc

import "testing"

// A heartbeat proves something because its change "comes through the
// source's log in order with every other" (README "Done marks"). A
// snapshot row of the heartbeat table does not: Maxwell's bootstrap (and
// Debezium's snapshots, op "r") read the table beside the binlog, stamped
// with the time of the read, while replication may be hours behind its
// log, exactly the flaw for which Debezium's heartbeat messages are
// refused. Beats.See takes every change with a row, so a bootstrap of
// ops.heartbeat at 22:25 is a heartbeat of 22:25, and every caught-up
// partition of the source counts as having reached it.
func TestBeatsIgnoreSnapshotRows(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatMaxwell})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBeats([]HeartbeatTable{{Database: "ops", Table: "heartbeat"}})
	changes, err := d.Decode(nil, "maxwell", nil,
		[]byte(`{"database":"ops","table":"heartbeat","type":"bootstrap-insert","ts":1449786310,"data":{"id":1,"beat":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Op != Read {
		t.Fatalf("decoded %+v, want one Read", changes)
	}
	b.See("maxwell", &changes[0])
	if l := b.Latest(); len(l) != 0 {
		t.Errorf("a bootstrap row of the heartbeat table is kept as a heartbeat of source time %d", l[0].SourceTime)
	}
}
