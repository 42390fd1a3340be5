package duckdb

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// oldLedgerReads are Positions and TopicIDs as they read the ledger before
// sink.LedgerReader: the whole ledger grouped, filtered to parts in Go.
func oldLedgerReads(t *testing.T, s *Sink, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, map[sink.TopicPartition]string) {
	t.Helper()
	want := map[sink.TopicPartition]bool{}
	for _, p := range parts {
		want[p] = true
	}
	positions := map[sink.TopicPartition]int64{}
	rows, err := s.db.Query(fmt.Sprintf(`SELECT topic, "partition", max(last_offset) FROM %s GROUP BY ALL`, s.tables.ledger))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tp sink.TopicPartition
		var last int64
		if err := rows.Scan(&tp.Topic, &tp.Partition, &last); err != nil {
			t.Fatal(err)
		}
		if want[tp] {
			positions[tp] = last + 1
		}
	}
	rows.Close()
	ids := map[sink.TopicPartition]string{}
	rows, err = s.db.Query(fmt.Sprintf(`SELECT topic, "partition", arg_max(topic_id, last_offset) FROM %s WHERE topic_id IS NOT NULL GROUP BY ALL`, s.tables.ledger))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tp sink.TopicPartition
		var id string
		if err := rows.Scan(&tp.Topic, &tp.Partition, &id); err != nil {
			t.Fatal(err)
		}
		if want[tp] {
			ids[tp] = id
		}
	}
	rows.Close()
	return positions, ids
}

// The one read of the assigned partitions' ledger rows (PositionsAndTopicIDs,
// and Positions and TopicIDs through it) answers what the two reads of the
// whole ledger answered, over random ledgers: topics whose names need
// quoting in SQL or look like other names (a prefix, a case variant, a
// trailing space, a LIKE pattern, an empty name), partitions without a row,
// rows without an id after and before rows with one, ids changing
// (a recreated topic), negative and large partitions, and parts asked for
// twice, in several calls, or not at all.
func TestLedgerReadsAnswerAsTheWholeLedgerReads(t *testing.T) {
	s := prepared(t, false)
	ctx := context.Background()
	topics := []string{"traces", "Traces", "traces ", "trace", "tra%es", "t_aces", `it's`, `a"b`, "a.b-c_d", "", "日本", `x\y`, "traces\n"}
	parts := []int32{0, 1, 2, 7, -1, 1 << 30}
	rng := rand.New(rand.NewPCG(43, 7))
	next := map[sink.TopicPartition]int64{}
	found, foundIDs := 0, 0
	for round := 0; round < 40; round++ {
		// Add a few ranges.
		for i := 0; i < 1+rng.IntN(8); i++ {
			tp := sink.TopicPartition{Topic: topics[rng.IntN(len(topics))], Partition: parts[rng.IntN(len(parts))]}
			first := next[tp]
			last := first + int64(rng.IntN(50))
			next[tp] = last + 1
			var id any
			if k := rng.IntN(4); k > 0 {
				id = fmt.Sprintf("id-%d", k)
			}
			if _, err := s.db.Exec(`INSERT INTO trace_raw_ledger (topic, "partition", first_offset, last_offset, topic_id, records, dlq_records, load_id, files, loaded_at)
				VALUES ($1, $2, $3, $4, $5, 1, 0, 'l', 1, now())`, tp.Topic, tp.Partition, first, last, id); err != nil {
				t.Fatal(err)
			}
		}
		// Ask for random parts, some twice, some unknown.
		var ask []sink.TopicPartition
		for i := 0; i < rng.IntN(12); i++ {
			tp := sink.TopicPartition{Topic: topics[rng.IntN(len(topics))], Partition: parts[rng.IntN(len(parts))]}
			ask = append(ask, tp)
			if rng.IntN(5) == 0 {
				ask = append(ask, tp)
			}
		}
		wantPos, wantIDs := oldLedgerReads(t, s, ask)
		pos, ids, err := s.PositionsAndTopicIDs(ctx, ask)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(pos, wantPos) || !maps.Equal(ids, wantIDs) {
			t.Fatalf("round %d, parts %q: positions %v ids %v; the whole ledger's reads gave %v %v", round, ask, pos, ids, wantPos, wantIDs)
		}
		found, foundIDs = found+len(pos), foundIDs+len(ids)
		if p, err := s.Positions(ctx, ask); err != nil || !maps.Equal(p, wantPos) {
			t.Fatalf("round %d: Positions %v (%v), want %v", round, p, err, wantPos)
		}
		if i, err := s.TopicIDs(ctx, ask); err != nil || !maps.Equal(i, wantIDs) {
			t.Fatalf("round %d: TopicIDs %v (%v), want %v", round, i, err, wantIDs)
		}
	}
	if found < 20 || foundIDs < 10 {
		t.Fatalf("the rounds found %d positions and %d ids: the test asks for too few partitions the ledger knows", found, foundIDs)
	}
	// All the partitions at once, in one call (an assignment of many).
	var all []sink.TopicPartition
	for _, tn := range topics {
		for _, p := range parts {
			all = append(all, sink.TopicPartition{Topic: tn, Partition: p})
		}
	}
	for p := int32(100); p < 2100; p++ {
		all = append(all, sink.TopicPartition{Topic: "traces", Partition: p})
	}
	wantPos, wantIDs := oldLedgerReads(t, s, all)
	pos, ids, err := s.PositionsAndTopicIDs(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) < len(topics) || !maps.Equal(pos, wantPos) || !maps.Equal(ids, wantIDs) {
		t.Fatalf("all parts: positions %v ids %v; the whole ledger's reads gave %v %v", pos, ids, wantPos, wantIDs)
	}
}
