package verify

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// querier answers verify's queries from canned rows, by the table the
// query reads; "ranges" answers the count per ledger range (raw mode).
type querier map[string][][]string

func (q querier) QueryText(_ context.Context, sql string) ([][]string, error) {
	if isLedgerSize(sql) {
		return ledgerSizeOf(q["ledger"]), nil
	}
	if strings.Contains(sql, " OVER (") {
		return q["ranges"], nil
	}
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

// isLedgerSize says whether q is Run's read of the ledger's size.
func isLedgerSize(q string) bool {
	return strings.Contains(q, "coalesce(sum(records + dlq_records), 0)")
}

// ledgerSizeOf answers Run's read of the ledger's size from the ledger's
// rows as Run reads them (records + dlq_records last).
func ledgerSizeOf(ledger [][]string) [][]string {
	var n int64
	for _, row := range ledger {
		v, _ := strconv.ParseInt(row[len(row)-1], 10, 64)
		n += v
	}
	return [][]string{{strconv.Itoa(len(ledger)), strconv.FormatInt(n, 10)}}
}

// A load committing between verify's read of the ledger and its counts of
// the tables (queries without one snapshot: Databend) is no mismatch:
// verify reads again. Only a ledger that keeps changing is an error.
func TestRunReadsAgainWhenALoadCommitsMeanwhile(t *testing.T) {
	// Ranges: topic, partition, first offset, rows, distinct, main-table
	// rows, least and greatest offset.
	before := querier{"ledger": {{"t", "0", "0", "9", "10"}}, "ranges": {{"t", "0", "0", "10", "10", "10", "0", "9"}}}
	after := querier{"ledger": {{"t", "0", "0", "9", "10"}, {"t", "0", "10", "19", "10"}},
		"ranges": {{"t", "0", "0", "10", "10", "10", "0", "9"}, {"t", "0", "10", "10", "10", "10", "10", "19"}}}
	loads := 1
	db := queryFunc(func(ctx context.Context, sql string) ([][]string, error) {
		state := after
		if loads > 0 {
			state = before
			if strings.Contains(sql, "first_offset") {
				loads-- // commits right after this ledger read
			}
		}
		return state.QueryText(ctx, sql)
	})
	rep, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger", Raw: true, Topic: "topic"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Partitions[0].LedgerRecords != 20 || rep.Partitions[0].Rows != 20 {
		t.Errorf("a load committed meanwhile: ok=%v %+v %q", rep.OK, rep.Partitions, rep.Problems)
	}
	loads = 1 << 30
	grow := 0
	db = queryFunc(func(ctx context.Context, sql string) ([][]string, error) {
		if isLedgerSize(sql) {
			grow++ // a load commits after every read
			return [][]string{{strconv.Itoa(grow), "0"}}, nil
		}
		return before.QueryText(ctx, sql)
	})
	if _, err := Run(context.Background(), db, Tables{Main: "main", DLQ: "dlq", Ledger: "ledger", Raw: true, Topic: "topic"}, nil, true); err == nil {
		t.Error("a ledger that changes during every read: no error")
	}
}

// queryFunc is a Querier.
type queryFunc func(ctx context.Context, sql string) ([][]string, error)

func (f queryFunc) QueryText(ctx context.Context, sql string) ([][]string, error) { return f(ctx, sql) }
