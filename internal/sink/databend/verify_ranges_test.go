package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/verify"
)

// verifyOf runs verify over the sink's tables without Kafka, as
// tracelake verify does in raw mode (and for a declared table).
func verifyOf(t *testing.T, s *databend.Sink, declared bool) *verify.Report {
	t.Helper()
	main, dlq, ledger := s.Tables()
	tables := verify.Tables{Main: main, DLQ: dlq, Ledger: ledger, Raw: true, Topic: s.MainTopicExpr()}
	if declared {
		tables.Index = "kindex"
	}
	rep, err := verify.Run(context.Background(), s, tables, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// at says whether a row (raw, declared or dead letter) is at offset o (and
// index i of its message, if i >= 0).
func at(o int64, i int) func(databendtest.Row) bool {
	return func(r databendtest.Row) bool {
		off := r["koffset"]
		if off == nil {
			off = r["offset"]
		}
		return string(off) == fmt.Sprint(o) && (i < 0 || string(r["kindex"]) == fmt.Sprint(i))
	}
}

// copyAt appends a copy of table's row that pick says with its offset
// set to o.
func copyAt(t *testing.T, srv *databendtest.Server, table string, pick func(databendtest.Row) bool, o int64) {
	t.Helper()
	for _, r := range srv.Rows(table) {
		if pick(r) {
			r = maps.Clone(r)
			col := "koffset"
			if _, ok := r[col]; !ok {
				col = "offset"
			}
			r[col] = json.RawMessage(fmt.Sprint(o))
			srv.AppendRow(table, r)
			return
		}
	}
	t.Fatalf("no row of %s to copy", table)
}

// verify compared a partition's rows with the ledger's count for the whole
// partition: a record deleted at one offset and a row stored at an offset
// no ledger range covers, or a second copy of another, kept the count and
// verify said OK. Databend now counts the rows of each ledger range.
func TestVerifyCountsRowsPerLedgerRange(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, srv *databendtest.Server)
		want   [][]string
	}{
		{"a row deleted, another copied to an offset no range covers", func(t *testing.T, srv *databendtest.Server) {
			srv.RemoveRows("trace_raw", at(5, -1))
			copyAt(t, srv, "trace_raw", at(3, -1), 25)
		}, [][]string{{"traces/0", "1 records", "not stored", "0-9"}, {"traces/0", "1 rows", "no ledger range covers", "25"}}},
		{"a row deleted, another stored twice", func(t *testing.T, srv *databendtest.Server) {
			srv.RemoveRows("trace_raw", at(5, -1))
			copyAt(t, srv, "trace_raw", at(3, -1), 3)
		}, [][]string{{"traces/0", "1 records", "not stored", "0-9"}, {"traces/0", "1 offsets stored more than once"}}},
		{"a dead letter deleted, a copy stored at an offset no range covers", func(t *testing.T, srv *databendtest.Server) {
			srv.RemoveRows("trace_raw_dlq", at(4, -1))
			copyAt(t, srv, "trace_raw_dlq", at(14, -1), 30)
		}, [][]string{{"traces/0", "1 records", "not stored", "0-9"}, {"traces/0", "1 rows", "no ledger range covers", "30"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, s := prepared(t, "")
			for _, b := range []*sink.Batch{batch(0, 0, 9, 4), batch(0, 10, 19, 14)} {
				if _, err := s.Load(context.Background(), stage(t, s, b)); err != nil {
					t.Fatal(err)
				}
			}
			if rep := verifyOf(t, s, false); !rep.OK {
				t.Fatalf("before: %q", rep.Problems)
			}
			c.tamper(t, srv)
			rep := verifyOf(t, s, false)
			if rep.OK {
				t.Fatalf("verify OK after %s: %+v", c.name, rep.Partitions)
			}
			for _, w := range c.want {
				if !sinktest.HasProblem(rep, w...) {
					t.Errorf("no problem with %q in %q", w, rep.Problems)
				}
			}
		})
	}
}

// The same on a declared table (otel_spans), whose messages hold many
// rows (kindex > 0).
func TestVerifyCountsSpansPerLedgerRange(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, srv *databendtest.Server)
		want   [][]string
	}{
		{"a span deleted, another copied to an offset no range covers", func(t *testing.T, srv *databendtest.Server) {
			srv.RemoveRows("otel_spans", at(1, 2))
			copyAt(t, srv, "otel_spans", at(12, 1), 40)
		}, [][]string{{"otlp/0", "1 records", "not stored", "0-9"}, {"otlp/0", "1 rows", "no ledger range covers", "40"}}},
		{"a span deleted, another stored twice", func(t *testing.T, srv *databendtest.Server) {
			srv.RemoveRows("otel_spans", at(1, 2))
			copyAt(t, srv, "otel_spans", at(2, 1), 2)
		}, [][]string{{"otlp/0", "1 records", "not stored", "0-9"}, {"otlp/0", "1 offsets stored more than once"}}},
		{"a dead letter deleted, a copy stored at an offset no range covers", func(t *testing.T, srv *databendtest.Server) {
			srv.RemoveRows("otel_spans_dlq", at(3, -1))
			copyAt(t, srv, "otel_spans_dlq", at(13, -1), 50)
		}, [][]string{{"otlp/0", "1 records", "not stored", "0-9"}, {"otlp/0", "1 rows", "no ledger range covers", "50"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := databendtest.New("tl", "s3cret")
			t.Cleanup(srv.Close)
			srv.Set(func() { srv.SQL = true }) // the dedup model's tables
			s := open(t, srv, "", spansOf(&otel.Spans))
			if err := s.Prepare(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, b := range []*sink.Batch{sinktest.SpansBatch(t, 0, 9, 3), sinktest.SpansBatch(t, 10, 19, 13)} {
				if _, err := s.Load(context.Background(), stage(t, s, b)); err != nil {
					t.Fatal(err)
				}
			}
			if rep := verifyOf(t, s, true); !rep.OK {
				t.Fatalf("before: %q", rep.Problems)
			}
			c.tamper(t, srv)
			rep := verifyOf(t, s, true)
			if rep.OK {
				t.Fatalf("verify OK after %s: %+v", c.name, rep.Partitions)
			}
			for _, w := range c.want {
				if !sinktest.HasProblem(rep, w...) {
					t.Errorf("no problem with %q in %q", w, rep.Problems)
				}
			}
		})
	}
}
