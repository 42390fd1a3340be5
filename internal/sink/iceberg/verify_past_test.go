package iceberg_test

import (
	"context"
	"testing"

	iceberggo "github.com/apache/iceberg-go"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/verify"
)

// A row at an offset its table's position has not reached, or of a
// partition its table has no position for, was written by no load: each
// load commits its rows with positions past them. On a sink with a ledger
// verify reports such rows (no ledger range covers them); on Iceberg it
// looked only below the positions and printed OK, though the next load of
// those offsets stores them a second time.
func TestVerifyRowsPastThePositions(t *testing.T) {
	at := func(col string, o int64) iceberggo.BooleanExpression {
		return iceberggo.EqualTo(iceberggo.Reference(col), o)
	}
	cases := []struct {
		name   string
		typed  bool
		tamper func(t *testing.T, s *iceberg.Sink)
		want   []string // substrings of one problem
	}{
		{"a raw row copied past the position", false, func(t *testing.T, s *iceberg.Sink) {
			raw, _ := s.Identifiers()
			icebergtest.AppendCopy(t, s.Catalog(), raw, at("koffset", 3), map[string]int64{"koffset": 15})
		}, []string{"traces/0", "1 rows", "past", "main table 15-15"}},
		{"a raw row copied to a partition without a position", false, func(t *testing.T, s *iceberg.Sink) {
			raw, _ := s.Identifiers()
			icebergtest.AppendCopy(t, s.Catalog(), raw, at("koffset", 3), map[string]int64{"kpartition": 1})
		}, []string{"traces/1", "1 rows", "past", "main table 3-3"}},
		{"a dead letter copied past the position", false, func(t *testing.T, s *iceberg.Sink) {
			_, dlq := s.Identifiers()
			icebergtest.AppendCopy(t, s.Catalog(), dlq, at("offset", 4), map[string]int64{"offset": 12})
		}, []string{"traces/0", "1 rows", "past", "dead-letter table 12-12"}},
		{"a message's second row copied past the position", true, func(t *testing.T, s *iceberg.Sink) {
			raw, _ := s.Identifiers()
			icebergtest.AppendCopy(t, s.Catalog(), raw, rowFilter(4, 1), map[string]int64{schema.OffsetColumn: 20})
		}, []string{"traces/0", "1 rows", "past", "main table 20-20"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s *iceberg.Sink
			if c.typed {
				s = openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &sinktest.Spans})
				load(t, s, messageBatch(0, 9))
			} else {
				s = openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw"})
				load(t, s, batch(0, 0, 9, 4))
			}
			if rep := verifyTyped(t, s, nil); !rep.OK {
				t.Fatalf("before: %q", rep.Problems)
			}
			c.tamper(t, s)
			rep := verifyTyped(t, s, nil)
			if rep.OK {
				t.Fatalf("verify OK after %s: %+v", c.name, rep.Partitions)
			}
			if !sinktest.HasProblem(rep, c.want...) {
				t.Errorf("no problem with %q in %q", c.want, rep.Problems)
			}
		})
	}
}

// A load committing while verify runs, after it read the positions and
// before it scanned the tables, is no row past a position: each table's
// rows are checked against the positions of the snapshot scanned.
func TestVerifyRowsLoadedWhileVerifyRunsAreNotPastThePositions(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw"})
	load(t, s, batch(0, 0, 9, 4))
	next, err := s.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 10, 19, 14), batch(1, 0, 9, 2))
	raw, err := s.Stored(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := s.Stored(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify.FromStored(nil, next, raw, dlq, nil, true, nil); !rep.OK {
		t.Errorf("a load committed meanwhile: %q %+v", rep.Problems, rep.Partitions)
	}
}
