package duckdb

import (
	"testing"

	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// A row stored twice is reported with the ledger range that holds it, as a
// range whose rows differ from its count is: "1 offsets stored more than
// once" alone sent an operator scanning a partition of billions of rows
// for it.
func TestVerifyNamesTheRangeOfARowStoredTwice(t *testing.T) {
	s := prepared(t, false)
	mustLoad(t, s, deadBatch(0, 9, 4))
	mustLoad(t, s, deadBatch(10, 19, 14))
	exec(t, s, `INSERT INTO trace_raw SELECT * FROM trace_raw WHERE koffset = 13`,
		`INSERT INTO trace_raw_dlq SELECT * FROM trace_raw_dlq WHERE "offset" = 4`)
	rep := verifyOf(t, s, false)
	if rep.OK {
		t.Fatalf("verify OK: %+v", rep.Partitions)
	}
	if !sinktest.HasProblem(rep, "t/0", "2 offsets stored more than once", "0-9", "10-19") {
		t.Errorf("the ranges are not named: %q", rep.Problems)
	}
}
