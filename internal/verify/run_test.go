package verify

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// querier answers verify's queries from canned rows, by the table the
// query reads.
type querier map[string][][]string

func (q querier) QueryText(_ context.Context, sql string) ([][]string, error) {
	for table, rows := range q {
		if strings.Contains(sql, "FROM "+table+" ") {
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
		"dlq": {{"t", "0", "3", "2"}},
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
