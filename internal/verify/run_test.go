package verify

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// querier answers verify's queries from canned rows, by the table the
// query reads.
type querier map[string][][]string

func (q querier) QueryText(_ context.Context, sql string) ([][]string, error) {
	for table, rows := range q {
		if strings.Contains(sql+" ", "FROM "+table+" ") {
			return rows, nil
		}
	}
	return nil, nil
}

// In transform mode the user's table has no offsets, but the dead-letter
// table does: an offset dead-lettered twice is a duplicate. verify printed
// OK over 5,017 such rows (Databend rejects loaded again after a
// rebalance).
func TestTransformModeCountsDeadLetterDuplicates(t *testing.T) {
	db := querier{
		"ledger": {{"t", "0", "0", "9", "10"}},
		// 3 dead-letter rows, 2 distinct offsets.
		"dlq":  {{"t", "0", "3", "2"}},
		"main": {{"7"}},
	}
	rep, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"t/0: 1 offsets stored more than once"}
	if rep.OK || !slices.Equal(rep.Problems, want) {
		t.Errorf("problems %q, want %q", rep.Problems, want)
	}
}

// In transform mode the user's table must hold at least the rows the
// ledger says were loaded into it; before, verify took the ledger's word
// for it.
func TestTransformModeCountsTheTable(t *testing.T) {
	db := querier{
		"ledger": {{"t", "0", "0", "9", "10"}},
		"dlq":    {{"t", "0", "2", "2"}},
		"main":   {{"5"}}, // the ledger says 8
	}
	rep, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"main holds 5 rows; the ledger counts 8 loaded into it"}
	if rep.OK || !slices.Equal(rep.Problems, want) {
		t.Errorf("problems %q, want %q", rep.Problems, want)
	}
	db["main"] = [][]string{{"8"}}
	if rep, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger"}, nil, true); err != nil || !rep.OK {
		t.Errorf("with every row there: %v %v", rep.Problems, err)
	}
}

// With start_offset latest, offsets below the first loaded one are shown
// as skipped, not as a gap; with earliest they are a gap.
func TestSkippedHeadIsShown(t *testing.T) {
	db := querier{
		"ledger": {{"t", "0", "40", "49", "10"}},
		"dlq":    {},
		"main":   {{"10"}},
	}
	marks := map[sink.TopicPartition]kafka.Watermarks{{Topic: "t", Partition: 0}: {Low: 0, High: 50}}
	latest, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger"}, marks, false)
	if err != nil {
		t.Fatal(err)
	}
	if !latest.OK || latest.Partitions[0].Skipped != 40 {
		t.Errorf("latest: ok=%v skipped=%d, want ok and 40", latest.OK, latest.Partitions[0].Skipped)
	}
	earliest, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger"}, marks, true)
	if err != nil {
		t.Fatal(err)
	}
	if earliest.OK || earliest.Partitions[0].Gaps != 40 {
		t.Errorf("earliest: ok=%v gaps=%d, want a gap of 40", earliest.OK, earliest.Partitions[0].Gaps)
	}
}
