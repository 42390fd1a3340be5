package cdc

import (
	"testing"
	"time"
)

// A heartbeat proves something because its change "comes through the
// source's log in order with every other" (README "Done marks"). A
// snapshot row of the heartbeat table does not: Maxwell's bootstrap (and
// Debezium's snapshots, op "r") read the table beside the binlog, stamped
// with the time of the read, while replication may be hours behind its
// log, the flaw for which Debezium's heartbeat messages count only less a
// lag. Beats.See used to take every change with a row, so a
// bootstrap of ops.heartbeat at 22:25 was a heartbeat of 22:25, and
// every caught-up partition of the source counted as having reached it.
func TestBeatsIgnoreSnapshotRows(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatMaxwell})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBeats([]Heartbeat{{Database: "ops", Table: "heartbeat"}})
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

// Debezium's heartbeat messages, with the schema wrapper or without,
// count as reaching their time less the configured lag, for the topics of
// their server by Debezium's naming (or those configured): its tables'
// and its schema change topic, named as the server, which carries its
// DROP TABLEs; a message of
// another heartbeat topic, or one without a time, counts for nothing.
func TestBeatsOfHeartbeatMessages(t *testing.T) {
	h, err := ParseHeartbeatTopic("__debezium-heartbeat.dbserver1", "", 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBeats([]Heartbeat{h})
	if !b.SeeMessage("__debezium-heartbeat.dbserver1", []byte(`{"ts_ms":1700000000000}`)) {
		t.Error("a message of the heartbeat topic is not taken for a heartbeat")
	}
	if b.SeeMessage("__debezium-heartbeat.dbserver2", []byte(`{"ts_ms":1800000000000}`)) {
		t.Error("a message of another topic is taken for a heartbeat")
	}
	b.SeeMessage("__debezium-heartbeat.dbserver1", []byte(`{"schema":{"type":"struct"},"payload":{"ts_ms":1700000600000}}`))
	b.SeeMessage("__debezium-heartbeat.dbserver1", []byte(`{"payload":{}}`))
	if b.SeeMessage("__debezium-heartbeat.dbserver1", []byte(`not json`)) {
		t.Error("a message that is not JSON is taken for a heartbeat (the decoder dead-letters it)")
	}
	if b.SeeMessage("__debezium-heartbeat.dbserver1", []byte(`{"payload":{"op":"c","ts_ms":1800000000000}}`)) {
		t.Error("a change (it has an op) on the heartbeat topic is taken for a heartbeat")
	}
	l := b.Latest()
	want := time.UnixMilli(1700000600000).Add(-30 * time.Minute).UnixMicro()
	if len(l) != 1 || l[0].SourceTime != want {
		t.Fatalf("latest %+v, want one of %d", l, want)
	}
	for topic, match := range map[string]bool{"dbserver1.inv.orders": true, "dbserver10.inv.orders": false, "dbserver1": true, "dbserver10": false} {
		if l[0].Topics.MatchString(topic) != match {
			t.Errorf("the heartbeat speaks for %s: %v, want %v", topic, !match, match)
		}
	}
	for _, bad := range []string{"heartbeats", "__debezium-heartbeat."} {
		if _, err := ParseHeartbeatTopic(bad, "", 0); err == nil {
			t.Errorf("heartbeat topic %q accepted", bad)
		}
	}
}
