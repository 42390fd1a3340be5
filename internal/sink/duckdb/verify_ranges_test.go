package duckdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/verify"
)

// verifyOf runs verify over the sink's tables (raw or declared) without
// Kafka.
func verifyOf(t *testing.T, s *Sink, declared bool) *verify.Report {
	t.Helper()
	tn := s.Tables()
	tables := verify.Tables{Main: tn.Main, DLQ: tn.DLQ, Ledger: tn.Ledger, Raw: true, Topic: TopicExpr}
	if declared {
		tables.Topic, tables.Index = "ktopic", "kindex"
	}
	rep, err := verify.Run(context.Background(), verify.SQLQuerier{DB: s.DB()}, tables, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// exec runs statements on the sink's database, as an operator (or a bug)
// changing the tables after loading would.
func exec(t *testing.T, s *Sink, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// deadBatch is offsets first..last of partition 0 of topic "t" as raw
// rows, those in bad as dead letters.
func deadBatch(first, last int64, bad ...int64) *sink.Batch {
	b := batch(first, last)
	b.Rows, b.Ranges[0].Records = nil, 0
	ids := envelope.NewUUIDs()
	var id [16]byte
	for o := first; o <= last; o++ {
		r := &kgo.Record{Topic: "t", Offset: o, Value: fmt.Appendf(nil, `{"o":%d}`, o), Timestamp: time.Now()}
		start, startDLQ := len(b.Rows), len(b.DLQ)
		if isIn(o, bad) {
			b.DLQ = envelope.AppendDLQRow(b.DLQ, r, "bad", envelope.StageDecode)
			b.Ranges[0].DLQ++
		} else {
			ids.Next(&id)
			b.Rows = envelope.AppendRawRow(b.Rows, r, &id, envelope.ValueVerbatim)
			b.Ranges[0].Records++
		}
		b.MaxLine = max(b.MaxLine, len(b.Rows)-start, len(b.DLQ)-startDLQ)
	}
	return b
}

func isIn(o int64, list []int64) bool {
	for _, x := range list {
		if x == o {
			return true
		}
	}
	return false
}

// verify compared the rows of a partition with the ledger's count for the
// whole partition: a row deleted at one offset and another stored at an
// offset no ledger range covers (or a second copy of a row at a covered
// one, or a row moved to another range) kept the partition's count, and
// verify said OK over a record missing and a row stored that was never
// loaded. It counts the rows of each ledger range now.
func TestVerifyCountsRowsPerLedgerRange(t *testing.T) {
	cases := []struct {
		name   string
		tamper []string
		want   [][]string // substrings of one problem each
	}{
		{"a row deleted, another copied to an offset no range covers", []string{
			`DELETE FROM trace_raw WHERE koffset = 5`,
			`INSERT INTO trace_raw SELECT * REPLACE (25 AS koffset) FROM trace_raw WHERE koffset = 3`,
		}, [][]string{{"t/0", "1 records", "not stored", "0-9"}, {"t/0", "1 rows", "no ledger range covers", "25"}}},
		{"a row deleted, another stored twice", []string{
			`DELETE FROM trace_raw WHERE koffset = 5`,
			`INSERT INTO trace_raw SELECT * FROM trace_raw WHERE koffset = 3`,
		}, [][]string{{"t/0", "1 records", "not stored", "0-9"}, {"t/0", "1 offsets stored more than once"}}},
		{"a row moved to another range", []string{
			`UPDATE trace_raw SET koffset = 12 WHERE koffset = 5`,
		}, [][]string{{"t/0", "1 records", "not stored", "0-9"}, {"t/0", "1 offsets stored more than once"}}},
		{"a dead letter deleted, a copy stored at an offset no range covers", []string{
			`DELETE FROM trace_raw_dlq WHERE "offset" = 4`,
			`INSERT INTO trace_raw_dlq SELECT * REPLACE (30 AS "offset") FROM trace_raw_dlq WHERE "offset" = 14`,
		}, [][]string{{"t/0", "1 records", "not stored", "0-9"}, {"t/0", "1 rows", "no ledger range covers", "30"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := prepared(t, false)
			mustLoad(t, s, deadBatch(0, 9, 4))
			mustLoad(t, s, deadBatch(10, 19, 14))
			if rep := verifyOf(t, s, false); !rep.OK {
				t.Fatalf("before: %q", rep.Problems)
			}
			exec(t, s, c.tamper...)
			rep := verifyOf(t, s, false)
			if rep.OK {
				t.Fatalf("verify OK after %q: %+v", c.tamper, rep.Partitions)
			}
			for _, w := range c.want {
				if !sinktest.HasProblem(rep, w...) {
					t.Errorf("no problem with %q in %q", w, rep.Problems)
				}
			}
		})
	}
}

// The same on a declared table (otel_spans), whose message holds many
// rows (kindex > 0): a span deleted and another stored where no ledger
// range reaches kept the partition's count.
func TestVerifyCountsSpansPerLedgerRange(t *testing.T) {
	cases := []struct {
		name   string
		tamper []string
		want   [][]string
	}{
		{"a span deleted, another copied to an offset no range covers", []string{
			`DELETE FROM otel_spans WHERE koffset = 1 AND kindex = 2`,
			`INSERT INTO otel_spans SELECT * REPLACE (40 AS koffset) FROM otel_spans WHERE koffset = 12 AND kindex = 1`,
		}, [][]string{{"otlp/0", "1 records", "not stored", "0-9"}, {"otlp/0", "1 rows", "no ledger range covers", "40"}}},
		{"a span deleted, another stored twice", []string{
			`DELETE FROM otel_spans WHERE koffset = 1 AND kindex = 2`,
			`INSERT INTO otel_spans SELECT * FROM otel_spans WHERE koffset = 2 AND kindex = 1`,
		}, [][]string{{"otlp/0", "1 records", "not stored", "0-9"}, {"otlp/0", "1 offsets stored more than once"}}},
		{"a dead letter deleted, a copy stored at an offset no range covers", []string{
			`DELETE FROM otel_spans_dlq WHERE "offset" = 3`,
			`INSERT INTO otel_spans_dlq SELECT * REPLACE (50 AS "offset") FROM otel_spans_dlq WHERE "offset" = 13`,
		}, [][]string{{"otlp/0", "1 records", "not stored", "0-9"}, {"otlp/0", "1 rows", "no ledger range covers", "50"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opt := testOptions(t.TempDir())
			opt.Table, opt.Typed = "otel_spans", &otel.Spans
			s := openWith(t, opt)
			if err := s.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			mustLoad(t, s, sinktest.SpansBatch(t, 0, 9, 3))
			mustLoad(t, s, sinktest.SpansBatch(t, 10, 19, 13))
			if rep := verifyOf(t, s, true); !rep.OK {
				t.Fatalf("before: %q", rep.Problems)
			}
			exec(t, s, c.tamper...)
			rep := verifyOf(t, s, true)
			if rep.OK {
				t.Fatalf("verify OK after %q: %+v", c.tamper, rep.Partitions)
			}
			for _, w := range c.want {
				if !sinktest.HasProblem(rep, w...) {
					t.Errorf("no problem with %q in %q", w, rep.Problems)
				}
			}
		})
	}
}
