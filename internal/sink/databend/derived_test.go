package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/verify"
)

func withOps(o *databend.Options) {
	o.Table, o.Prefix = "spans", "tracelake/spans/"
	o.Typed, o.Derived, o.DerivedTable = &sinktest.Spans, &sinktest.Ops, "ops"
}

// Derived rows load in the transaction of their rows, fenced alike: a
// former owner's overlapping file adds no operation twice, and an
// operation Databend rejects is dead-lettered as the row while its span
// and the other operations load.
func TestDerivedRowsAreFencedAndRejectsDeadLettered(t *testing.T) {
	srv, s := prepared(t, "", withOps)
	if cols := srv.Columns("ops"); !slices.Equal(cols, []string{"name VARCHAR", "cost DECIMAL(18, 12)", "ktopic VARCHAR", "kpartition INT", "koffset BIGINT", "kindex INT"}) {
		t.Fatalf("ops columns %v", cols)
	}
	ctx := context.Background()
	if _, err := s.Load(ctx, stage(t, s, sinktest.DerivedBatch(0, 9, 0))); err != nil {
		t.Fatal(err)
	}
	srv.Reject = func(table string, r databendtest.Row) string {
		if table == "ops" && string(r["koffset"]) == "17" {
			return "bad decimal literal"
		}
		return ""
	}
	// A partly loaded file (a former owner's 5..14) and a new one.
	loaded, err := s.Load(ctx, stage(t, s, sinktest.DerivedBatch(5, 14, 0), sinktest.DerivedBatch(15, 19, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].First != 10 || loaded.Ranges[0].Records != 20 || loaded.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v; want 10..19 with 20 rows and the rejected operation as a dead letter", loaded.Ranges)
	}
	if len(loaded.Rejected) != 0 {
		t.Errorf("reported as rejected %+v: an operation's span loaded, so the span was not", loaded.Rejected)
	}
	var ops []string
	for _, r := range srv.Rows("ops") {
		var name string
		_ = json.Unmarshal(r["name"], &name)
		ops = append(ops, name)
	}
	slices.Sort(ops)
	var want []string
	for o := range 20 {
		if o != 17 {
			want = append(want, fmt.Sprintf("op %d", o))
		}
	}
	slices.Sort(want)
	if !slices.Equal(ops, want) {
		t.Errorf("operations %v, want %v", ops, want)
	}
	if n := len(srv.Rows("spans")); n != 40 {
		t.Errorf("%d spans, want 40", n)
	}
	dl := srv.Rows("spans_dlq")
	if len(dl) != 1 || !strings.Contains(string(dl[0]["error"]), "bad decimal literal") {
		t.Errorf("dead letters %v", dl)
	}
}

// verify's check of the spans against their operations on Databend: an
// operation Databend rejected is in the dead-letter table as the row
// (base64 of its JSON at its span's offset), so its span is excused; an
// operation deleted is reported, with where; the spans past the ledger's
// positions read first are left out (a load committing meanwhile).
func TestVerifyFindsSpansWithoutTheirOperation(t *testing.T) {
	srv, s := prepared(t, "", withOps)
	ctx := context.Background()
	if _, err := s.Load(ctx, stage(t, s, sinktest.DerivedBatch(0, 9, 0))); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() {
		srv.Reject = func(table string, r databendtest.Row) string {
			if table == "ops" && string(r["koffset"]) == "12" {
				return "bad decimal literal"
			}
			return ""
		}
	})
	if _, err := s.Load(ctx, stage(t, s, sinktest.DerivedBatch(10, 14, 0))); err != nil {
		t.Fatal(err)
	}
	_, dlq, _ := s.Tables()
	check := func() *verify.Report {
		t.Helper()
		last, err := s.LastLoaded(ctx)
		if err != nil {
			t.Fatal(err)
		}
		below := map[sink.TopicPartition]int64{}
		for tp, o := range last {
			below[tp] = o + 1
		}
		// In sinktest's tables the span of index 1 makes the operation.
		src := verify.Sources{Derives: "kindex = 1", DLQ: dlq, Below: below, Quote: sqltext.DatabendString}
		r := &verify.Report{OK: true}
		if err := r.CheckDerived(ctx, s, "ops", `"ops"`, `"spans"`, nil, src); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := check(); !r.OK || r.Derived.Missing != 0 || r.Derived.DeadLettered != 1 {
		t.Fatalf("an operation dead-lettered: %+v %v", r.Derived, r.Problems)
	}
	srv.Set(func() {
		srv.Reject = nil
		srv.SQL = true // the DELETE below
	})
	if _, err := s.QueryText(ctx, `DELETE FROM "ops" WHERE koffset = 7`); err != nil {
		t.Fatal(err)
	}
	r := check()
	if p := strings.Join(r.Problems, "; "); r.OK || r.Derived.Missing != 1 || !strings.Contains(p, "traces/0 offset 7 index 1") {
		t.Fatalf("an operation deleted: %+v %v", r.Derived, r.Problems)
	}
	// Spans committed past the positions read (their operations not
	// read yet) are no false alarm: a span of offset 20 without its
	// operation, as a statement reading after its load would see it.
	if _, err := s.QueryText(ctx, `INSERT INTO "spans" VALUES ('span 20.1', 'traces', 0, 20, 1)`); err != nil {
		t.Fatal(err)
	}
	if r := check(); r.Derived.Missing != 1 {
		t.Fatalf("a span past the positions: %+v %v", r.Derived, r.Problems)
	}
	// An operation of a span that derives none (index 0) is reported.
	if _, err := s.QueryText(ctx, `INSERT INTO "ops" VALUES ('op 3.0', 0.5, 'traces', 0, 3, 0)`); err != nil {
		t.Fatal(err)
	}
	if r := check(); r.OK || r.Derived.Unmarked != 1 || !slices.Equal(r.Derived.UnmarkedAt, []string{"traces/0 offset 3 index 0"}) {
		t.Fatalf("an operation of a span that derives none: %+v %v", r.Derived, r.Problems)
	}
}
