package verify

import (
	"context"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// A partition loaded up to offset 10 (rows 0-9 stored, position 10) whose
// loader then stopped while retention deleted offsets 0-39 (Low 40): the
// records 10-39 were never loaded and can no longer be. Since 7245d89 the
// lag leaves them out ("a gap if it was never loaded"), but no gap counts
// them either: verify says OK and the 30 lost records appear nowhere.
// Before that change they were at least in the lag (90).
func TestRecordsRetentionDeletedPastThePositionAreAGap(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 40, High: 100}}
	next := map[sink.TopicPartition]int64{tp: 10}
	var o sink.Offsets
	for off := int64(0); off < 10; off++ {
		o.Add(off)
	}
	raw := map[sink.TopicPartition]*sink.Offsets{tp: &o}
	records := func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		return map[sink.TopicPartition]*sink.Offsets{}, nil
	}
	for _, fromStart := range []bool{true, false} {
		rep := FromStored(marks, next, raw, nil, nil, fromStart, records)
		p := rep.Partitions[0]
		if rep.OK || p.Gaps != 30 {
			t.Errorf("fromStart %v: position 10, log start 40: OK=%v gaps=%d lag=%d problems=%q; want offsets 10-39 missing (30, a gap: deleted before they were loaded), lag 60",
				fromStart, rep.OK, p.Gaps, p.Lag, rep.Problems)
		}
	}
	// The same with nothing stored: the position alone says where loading stood.
	for _, fromStart := range []bool{true, false} {
		rep := FromStored(marks, next, nil, nil, nil, fromStart, records)
		p := rep.Partitions[0]
		if rep.OK || p.Gaps < 30 {
			t.Errorf("no row stored, fromStart %v: position 10, log start 40: OK=%v gaps=%d lag=%d; want at least offsets 10-39 missing",
				fromStart, rep.OK, p.Gaps, p.Lag)
		}
	}
}

// ledgerRows answers Run's queries: the ledger's rows for the ledger
// query, nothing else.
type ledgerRows [][]string

func (l ledgerRows) QueryText(_ context.Context, q string) ([][]string, error) {
	if isLedgerSize(q) {
		return ledgerSizeOf(l), nil
	}
	if strings.Contains(q, "first_offset") {
		return l, nil
	}
	if strings.HasPrefix(q, "SELECT count(*) FROM") {
		return [][]string{{"10"}}, nil
	}
	return nil, nil
}

// The ledger path (DuckDB, Databend): the ledger reaches offset 10, the
// log now starts at 40. Records 10-39 were never loaded and are gone:
// a gap, not a lag of 60 with verify OK.
func TestLedgerPastPositionDeletedByRetentionIsAGap(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 40, High: 100}}
	ledger := ledgerRows{{"t", "0", "0", "9", "10"}}
	for _, fromStart := range []bool{true, false} {
		rep, err := Run(context.Background(), ledger, Tables{Main: "m", DLQ: "d", Ledger: "l"}, marks, fromStart)
		if err != nil {
			t.Fatal(err)
		}
		p := rep.Partitions[0]
		if rep.OK || p.Gaps != 30 {
			t.Errorf("fromStart %v: ledger next 10, log start 40: OK=%v gaps=%d lag=%d problems=%q; want offsets 10-39 missing (30)",
				fromStart, rep.OK, p.Gaps, p.Lag, rep.Problems)
		}
	}
}
