package duckdb

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// A dead letter that fails again when replayed comes back whole: its key,
// headers (a tenant sent as a header among them) and time are the ones it
// had, so a replay after the next fix still loads the record as its first
// load would have, and it is in the dead-letter table once. Both ways of
// failing again: a value tracelake's check refuses (stage decode) and one
// only DuckDB's parser refuses (stage load, read back from the staged
// row's record_metadata).
func TestReplayFailingAgainKeepsTheRecord(t *testing.T) {
	for name, value := range map[string]string{
		"decode": `not json`,
		"load":   `{"a":"\ud800"}`, // a lone surrogate escape: DuckDB's parser refuses it
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := prepared(t, false)
			rec := headeredRecord(0, value)
			b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 0, DLQ: 1}}}
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "an older check", envelope.StageDecode)
			loadKeepsHeaders(t, s, b, "trace_raw_dlq")
			for range 2 {
				res, err := s.Replay(ctx, ReplayOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Candidates != 1 || res.Loaded != 0 {
					t.Fatalf("replay: %+v, want the row failing again", res)
				}
				var key, stage string
				if err := s.DB().QueryRow(`SELECT "key"::VARCHAR, stage FROM trace_raw_dlq`).Scan(&key, &stage); err != nil {
					t.Fatalf("the dead letter after the replay: %v", err)
				}
				if key != "k" || stage != name {
					t.Errorf("dead letter's key %q, stage %q; want k, %s", key, stage, name)
				}
				if n := count(t, s, `SELECT count(*) FROM trace_raw`); n != 0 {
					t.Errorf("%d rows loaded", n)
				}
			}
			var headers, created string
			if err := s.DB().QueryRow(`SELECT headers::VARCHAR, strftime(create_time, '%Y-%m-%dT%H:%M:%S.%g') FROM trace_raw_dlq`).Scan(&headers, &created); err != nil {
				t.Fatal(err)
			}
			sameJSON(t, "headers after replays", headers, headeredJSON)
			if created != "2026-03-01T12:34:56.789" {
				t.Errorf("create_time after replays = %s, want the record's 2026-03-01T12:34:56.789", created)
			}
		})
	}
}
