package main

import "testing"

// With kafka.start_offset latest a partition with neither a ledger
// position nor a committed offset starts at its end as the run started:
// the records before are skipped on purpose, and nothing goes into the
// ledger for them (the start is committed to the group alone). MarkReady
// lists the partition (log start 0, end 1), finds nothing of it in the
// ledger, and takes it as a partition with records to load and none
// loaded: it holds every table of the topic back until a change loads
// on it — for good on a quiet partition, whatever the heartbeats or
// cdc.idle say (a partition nothing has loaded on is never quiet, and a
// heartbeat moves only a partition loaded to its end). Here partition 1
// had a change of deals before the first run; after it, leads changes
// on partition 0 at 22:25 and the heartbeat of 23:05 loads, and
// partition 1 has nothing to load: leads's 22:00 is complete.
func TestCDCStartOffsetLatestPartitionDoesNotHoldMarks(t *testing.T) {
	h := newHeartbeatTest(t)
	cfgPath := writeConfig(t, h.cluster, "format: maxwell, start_offset: latest", "merge: {every: 1h}\ncdc: {heartbeats: [{table: ops.heartbeat}]}")
	h.produce(h.msg(testTopic, 1, "deals", `{"id":7,"stage":"new"}`, beatAt-3600, 90)) // before the first run: skipped
	cdcRun(t, h.bin, cfgPath).Close()
	h.produce(h.msg(testTopic, 0, "leads", `{"id":1,"name":"Lem"}`, beatAt, 100),
		h.msg(testTopic, 0, "heartbeat", `{"id":1,"beat":"23:05"}`, beatAt+2400, 130)) // 23:05
	db := cdcRun(t, h.bin, cfgPath)
	wantRows(t, db, `SELECT count(*) FROM cdc_crm_leads`, "1")
	db.Close()
	if !h.ready(cfgPath, "cdc_crm_leads") {
		t.Errorf("cdc_crm_leads's 22:00 is not done after a heartbeat of 23:05, every partition read to its end (partition 1's record skipped by start_offset latest)")
	}
}
