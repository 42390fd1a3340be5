package verify

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// The OTLP receivers' own sequence (otlp.mode load, ledger topic
// otlp:<signal>) starts at position 0, and no Kafka holds it to ask for
// a log start: verify checked it only from its first stored (or ledger)
// position, so the loss of its first requests' rows — an Iceberg data
// file removed from the snapshot, a ledger's first ranges gone with their
// rows — printed OK, whatever kafka.start_offset said.
func TestOTLPSequenceIsCheckedFromItsStart(t *testing.T) {
	seq := sink.TopicPartition{Topic: "otlp:traces", Partition: 0}
	var rows sink.Offsets
	for o := int64(10); o < 20; o++ {
		rows.Add(o)
	}
	next := map[sink.TopicPartition]int64{seq: 20}
	for _, fromStart := range []bool{true, false} {
		rep := FromStored(nil, next, map[sink.TopicPartition]*sink.Offsets{seq: &rows}, nil, nil, fromStart, nil)
		if rep.OK || !hasProblem(rep, "otlp:traces/0: 10 offsets missing (gap: 0-9)") {
			t.Errorf("Iceberg, positions 0-9 stored nowhere (fromStart %v): %q %+v", fromStart, rep.Problems, rep.Partitions)
		}
		rep = FromStored(nil, next, nil, nil, nil, fromStart, nil)
		if rep.OK || !hasProblem(rep, "otlp:traces/0: 20 offsets missing (gap: 0-19)") {
			t.Errorf("Iceberg, a position and nothing stored (fromStart %v): %q %+v", fromStart, rep.Problems, rep.Partitions)
		}
		// Positions abandoned by a failed load hold nothing: no gap.
		abandoned := map[sink.TopicPartition][]sink.Run{seq: {{First: 0, Last: 9}}}
		if rep := FromStored(nil, next, map[sink.TopicPartition]*sink.Offsets{seq: &rows}, nil, abandoned, fromStart, nil); !rep.OK {
			t.Errorf("Iceberg, positions 0-9 abandoned (fromStart %v): %q", fromStart, rep.Problems)
		}

		db := querier{
			"ledger": {{"otlp:traces", "0", "10", "19", "10"}},
			"ranges": {{"otlp:traces", "0", "10", "10", "10", "10", "10", "19"}},
		}
		rep, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger", Raw: true}, nil, fromStart)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || !hasProblem(rep, "otlp:traces/0: 10 offsets missing (gap: 0-9)") {
			t.Errorf("ledger from 10 (fromStart %v): %q %+v", fromStart, rep.Problems, rep.Partitions)
		}
		db["ledger"][0][2] = "0"
		db["ranges"][0][2], db["ranges"][0][6] = "0", "0"
		db["ledger"][0][4], db["ranges"][0][3], db["ranges"][0][4], db["ranges"][0][5] = "20", "20", "20", "20"
		if rep, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger", Raw: true}, nil, fromStart); err != nil || !rep.OK {
			t.Errorf("ledger from 0 (fromStart %v): %v %q %+v", fromStart, err, rep.Problems, rep.Partitions)
		}
	}
}

// hasProblem says whether rep has the problem p.
func hasProblem(rep *Report, p string) bool {
	for _, q := range rep.Problems {
		if q == p {
			return true
		}
	}
	return false
}
