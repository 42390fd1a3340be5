package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// openTyped opens a sink of a declared OpenTelemetry table on the catalog
// in dir (a second call opens the same tables: another process).
func openTyped(t *testing.T, dir string, typed *schema.Table) *iceberg.Sink {
	t.Helper()
	return openPrepared(t, dir, iceberg.Options{Table: typed.Name, Typed: typed, DedupTable: typed.Name + "_dedup"})
}

// openPrepared opens a sink of opt on the SQLite catalog and local
// warehouse in dir, namespace tracelake, and prepares its tables.
func openPrepared(t *testing.T, dir string, opt iceberg.Options) *iceberg.Sink {
	t.Helper()
	opt.Catalog, opt.Warehouse, opt.Namespace = filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"), "tracelake"
	s, err := iceberg.Open(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// spansRequest is an export request of spans with the given ids (trace 1),
// each starting at start.
func spansRequest(t *testing.T, start time.Time, ids ...byte) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for _, id := range ids {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(fmt.Sprintf("span %d", id))
		sp.SetTraceID([16]byte{1})
		sp.SetSpanID([8]byte{id})
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
	}
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dedupRows reads the target: each row's key column values as
// "span_id@koffset" (spans) or "body@koffset" (logs), and the number of
// rows per dedup_key.
func dedupRows(t *testing.T, s *iceberg.Sink, target, col string) (rows []string, perKey map[string]int) {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, table.Identifier{"tracelake", target})
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields(col, "koffset", "kpartition", iceberg.DedupKeyColumn)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	perKey = map[string]int{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		vals := rec.Column(idx(col)).(*array.String)
		offs := rec.Column(idx("koffset")).(*array.Int64)
		parts := rec.Column(idx("kpartition")).(*array.Int32)
		keys := rec.Column(idx(iceberg.DedupKeyColumn)).(*array.String)
		for i := range int(rec.NumRows()) {
			rows = append(rows, fmt.Sprintf("%s@%d/%d", vals.Value(i), parts.Value(i), offs.Value(i)))
			perKey[keys.Value(i)]++
		}
		rec.Release()
	}
	return rows, perKey
}

// Copies of a request (a client's retry after a lost answer) keep their
// spans once in otel_spans_dedup, the first copy's; merges are
// incremental (a copy arriving after its original was merged is left out
// too) and a repeated merge adds nothing. Two processes merging at once
// insert nothing twice.
func TestDedupKeepsEachSpanOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTyped(t, dir, &otel.Spans)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	a, b, c := spansRequest(t, day, 1, 2, 3), spansRequest(t, day, 4, 5, 6), spansRequest(t, day.Add(time.Hour), 7)
	// Partition 0: A, A again (the retry), B; partition 1: B again.
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, a, a, b), sinktest.OTLPBatch(t, otel.SignalTraces, 1, 0, b))
	checkCounts(t, s, iceberg.DedupCounts{Rows: 12, Identities: 6, Kept: 0, Pending: 12}) // never merged
	res, err := s.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 12 || res.Inserted != 6 {
		t.Errorf("first merge read %d and inserted %d, want 12 and 6", res.Read, res.Inserted)
	}
	// A late copy of A, and C.
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 3, a, c))
	if res, err = s.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"}); err != nil || res.Read != 4 || res.Inserted != 1 {
		t.Errorf("second merge read %d and inserted %d (%v), want 4 and 1", res.Read, res.Inserted, err)
	}
	if res, err = s.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"}); err != nil || res.Read != 0 || res.Inserted != 0 {
		t.Errorf("a repeated merge read %d and inserted %d (%v), want nothing", res.Read, res.Inserted, err)
	}
	checkCounts(t, s, iceberg.DedupCounts{Rows: 16, Identities: 7, Kept: 7, Pending: 0})
	rows, perKey := dedupRows(t, s, "otel_spans_dedup", "name")
	want := map[string]bool{"span 1@0/0": true, "span 2@0/0": true, "span 3@0/0": true, "span 4@0/2": true, "span 5@0/2": true, "span 6@0/2": true, "span 7@0/4": true}
	if len(rows) != len(want) || len(perKey) != len(want) {
		t.Errorf("target rows %v (%d keys), want %d: each span once", rows, len(perKey), len(want))
	}
	for _, r := range rows {
		if !want[r] {
			t.Errorf("target row %s: not the first copy", r)
		}
	}

	// Two processes merge the same increment at once: one commit lands,
	// the other fails on the moved snapshot, and no span is there twice.
	other := openTyped(t, dir, &otel.Spans)
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 1, 1, spansRequest(t, day, 8, 9), spansRequest(t, day, 8, 9)))
	var wg sync.WaitGroup
	var inserted [2]int64
	for i, snk := range []*iceberg.Sink{s, other} {
		wg.Go(func() {
			r, err := snk.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"})
			if err == nil {
				inserted[i] = r.Inserted
			}
		})
	}
	wg.Wait()
	if _, err := s.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"}); err != nil {
		t.Fatal(err)
	}
	rows, perKey = dedupRows(t, s, "otel_spans_dedup", "name")
	if len(rows) != 9 || len(perKey) != 9 || inserted[0]+inserted[1] > 2 {
		t.Errorf("after concurrent merges: %d rows, %d keys (inserted %v), want 9 spans once", len(rows), len(perKey), inserted)
	}
	// Maintenance looks after the target too: a merge is a snapshot.
	exp, err := s.Expire(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(exp, func(e iceberg.Expiry) bool {
		return e.Table == "tracelake.otel_spans_dedup" && e.Expired > 0 && e.Remain == 1
	}) {
		t.Errorf("expiry passes over the dedup table: %+v", exp)
	}
	if rows, _ := dedupRows(t, s, "otel_spans_dedup", "name"); len(rows) != 9 {
		t.Errorf("%d rows after expiry, want 9", len(rows))
	}
}

// checkCounts checks what verify reports of otel_spans' copies.
func checkCounts(t *testing.T, s *iceberg.Sink, want iceberg.DedupCounts) {
	t.Helper()
	got, err := s.DedupCounts(context.Background(), []string{"tenant_id", "trace_id", "span_id"})
	if err != nil || got != want {
		t.Errorf("counts %+v (%v), want %+v", got, err, want)
	}
}

// Log records have no id: a record is a copy when every column but the
// coordinates is equal (a hash of them), so two records alike but for
// their body both stay.
func TestDedupHashesRecordsWithoutAnId(t *testing.T) {
	s := openTyped(t, t.TempDir(), &otel.Logs)
	logs := func(bodies ...string) []byte {
		ld := plog.NewLogs()
		lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
		for _, body := range bodies {
			r := lr.AppendEmpty()
			r.Body().SetStr(body)
			r.SetTimestamp(pcommon.NewTimestampFromTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)))
		}
		b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	load(t, s, sinktest.OTLPBatch(t, otel.SignalLogs, 0, 0, logs("hello", "world"), logs("hello", "world"), logs("hello", "there")))
	res, err := s.Dedup(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, perKey := dedupRows(t, s, "otel_logs_dedup", "body")
	if res.Read != 6 || res.Inserted != 3 || len(perKey) != 3 {
		t.Errorf("read %d, inserted %d, target %v; want 6, 3: hello and world once, there", res.Read, res.Inserted, rows)
	}
}

// A merge whose rows were all copies moves the target's positions in an
// empty snapshot: a stale merge (its increment read before another
// merge's commit) then loses the race instead of setting the positions
// back. It committed properties alone, which the snapshot assertion did
// not stop, and the rows between were merged again.
func TestStaleDedupDoesNotLowerThePositions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, other := openTyped(t, dir, &otel.Spans), openTyped(t, dir, &otel.Spans)
	id := []string{"tenant_id", "trace_id", "span_id"}
	a := spansRequest(t, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), 1, 2)
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, a))
	if _, err := s.Dedup(ctx, id); err != nil {
		t.Fatal(err)
	}
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 1, a)) // a client's retry: copies
	raced := false
	s.SetBeforeDedupCommit(func() {
		if raced {
			return
		}
		raced = true
		// Another copy, and another process's merge of both.
		load(t, other, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 2, a))
		if _, err := other.Dedup(ctx, id); err != nil {
			t.Error(err)
		}
	})
	if _, err := s.Dedup(ctx, id); err == nil || !iceberg.LostRace(err) {
		t.Errorf("the stale merge: %v, want a lost race", err)
	}
	checkCounts(t, s, iceberg.DedupCounts{Rows: 6, Identities: 2, Kept: 2, Pending: 0})
}

// A dedup merge's files wait for its commit outside any snapshot: an
// orphan cleanup meanwhile (another process's, judging them old) deleted
// them, and the commit referenced files that were gone. They are leased
// from when each is written until the commit, as a compaction's.
func TestOrphansKeepADedupMergesFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTyped(t, dir, &otel.Spans)
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, spansRequest(t, day, 1, 2, 3)))
	cleaner := openTyped(t, dir, &otel.Spans)
	s.SetBeforeDedupCommit(func() { cleanAllAged(t, cleaner, filepath.Join(dir, "warehouse"), "before the merge's commit") })
	res, err := s.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"})
	s.SetBeforeDedupCommit(nil)
	if err != nil || res.Inserted != 3 {
		t.Fatalf("merge inserted %d (%v), want 3", res.Inserted, err)
	}
	if rows, _ := dedupRows(t, s, "otel_spans_dedup", "name"); len(rows) != 3 {
		t.Errorf("%d rows merged, want 3", len(rows))
	}
}

// `tracelake merge` runs the dedup merge in a process of its own, which
// stages nothing: its leases were never started (only staging and
// compaction started them), so the merge's files, listed for leasing,
// were in no lease written, and an orphan cleanup before its commit
// deleted them all the same.
func TestOrphansKeepTheFilesOfADedupMergeInAProcessOfItsOwn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	day := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	load(t, openTyped(t, dir, &otel.Spans), sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, spansRequest(t, day, 1, 2, 3)))
	merger := openTyped(t, dir, &otel.Spans)
	cleaner := openTyped(t, dir, &otel.Spans)
	merger.SetBeforeDedupCommit(func() { cleanAllAged(t, cleaner, filepath.Join(dir, "warehouse"), "before the merge's commit") })
	res, err := merger.Dedup(ctx, []string{"tenant_id", "trace_id", "span_id"})
	merger.SetBeforeDedupCommit(nil)
	if err != nil || res.Inserted != 3 {
		t.Fatalf("merge inserted %d (%v), want 3", res.Inserted, err)
	}
	if rows, _ := dedupRows(t, merger, "otel_spans_dedup", "name"); len(rows) != 3 {
		t.Errorf("%d rows merged, want 3", len(rows))
	}
}

// Two log records that differ only in how their text splits between two
// columns (scope "a/b" version "1", scope "a" version "b/1") are two
// records: the dedup merge keeps both. Their key joined the columns' text
// with "/" before hashing it, so both had one key and the second was left
// out of the target as a copy — a record lost.
func TestDedupKeepsRecordsWhoseColumnsJoinAlike(t *testing.T) {
	s := openTyped(t, t.TempDir(), &otel.Logs)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	for _, scope := range [][2]string{{"a/b", "1"}, {"a", "b/1"}} {
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(scope[0])
		sl.Scope().SetVersion(scope[1])
		r := sl.LogRecords().AppendEmpty()
		r.Body().SetStr("hello")
		r.SetTimestamp(pcommon.NewTimestampFromTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)))
	}
	body, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	load(t, s, sinktest.OTLPBatch(t, otel.SignalLogs, 0, 0, body))
	res, err := s.Dedup(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, perKey := dedupRows(t, s, "otel_logs_dedup", "scope_name")
	if res.Read != 2 || res.Inserted != 2 || len(perKey) != 2 {
		t.Errorf("read %d, inserted %d, target %v (keys %v); want both records, under two keys", res.Read, res.Inserted, rows, perKey)
	}
}

// A log record merged into the dedup target by a release before
// 66f2b1b, whose key joined the columns' text unescaped, and sent again
// after the upgrade (a client's retry across the restart) is one record:
// the copy is left out. Any record with a '/' in a column (a Go
// instrumentation's scope name, a URL) has another key now, and the copy
// was inserted beside the row already merged — the record twice.
func TestDedupFindsCopiesOfRowsKeyedBeforeTheEscaping(t *testing.T) {
	ctx := context.Background()
	s := openTyped(t, t.TempDir(), &otel.Logs)
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName("go.opentelemetry.io/contrib/bridges/otelslog")
	r := sl.LogRecords().AppendEmpty()
	r.Body().SetStr("GET /api/v1/items")
	r.SetTimestamp(pcommon.NewTimestampFromTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)))
	body, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	load(t, s, sinktest.OTLPBatch(t, otel.SignalLogs, 0, 0, body))
	if res, err := s.Dedup(ctx, nil); err != nil || res.Inserted != 1 {
		t.Fatalf("first merge inserted %d (%v), want 1", res.Inserted, err)
	}
	if err := s.RekeyDedupTargetAsBefore(ctx, nil); err != nil {
		t.Fatal(err)
	}
	load(t, s, sinktest.OTLPBatch(t, otel.SignalLogs, 0, 1, body)) // the retry
	res, err := s.Dedup(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := dedupRows(t, s, "otel_logs_dedup", "body")
	if res.Read != 1 || res.Inserted != 0 || len(rows) != 1 {
		t.Errorf("merge of the copy read %d, inserted %d; target %v, want the record once", res.Read, res.Inserted, rows)
	}
}

// Spans without a span id (all zero in OTLP, stored null) have no
// identity: their key joined the ids with a null marker, so every such
// span of a trace had one key and the merge kept one of them. They are
// keyed by their content, as log records are, and verify's identities
// count them so.
func TestDedupKeepsSpansWithoutSpanID(t *testing.T) {
	s := openTyped(t, t.TempDir(), &otel.Spans)
	v := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "first", "second")
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, v, v)) // the second: a client's retry
	res, err := s.Dedup(context.Background(), []string{"tenant_id", "trace_id", "span_id"})
	if err != nil {
		t.Fatal(err)
	}
	rows, perKey := dedupRows(t, s, "otel_spans_dedup", "name")
	slices.Sort(rows)
	if want := []string{"first@0/0", "second@0/0"}; res.Read != 4 || res.Inserted != 2 || !slices.Equal(rows, want) || len(perKey) != 2 {
		t.Errorf("read %d, inserted %d, target %v (keys %v); want 4, 2: %v under two keys", res.Read, res.Inserted, rows, perKey, want)
	}
	checkCounts(t, s, iceberg.DedupCounts{Rows: 4, Identities: 2, Kept: 2, Pending: 0})
}

// A target merged by a release before content keys for spans holds a
// span without a span id under its ids joined with a null marker, the key
// of all such spans of its trace, and its files cannot be rekeyed in
// place. After the upgrade a copy of it (a client's retry) is still left
// out, found by the content of the target's rows with a null id, and a
// new such span of its trace is kept, which the old key, looked up as it
// was, would have dropped as a copy. A span with its ids keeps its key.
func TestDedupCarriesOverOldKeysOfSpansWithoutSpanID(t *testing.T) {
	ctx := context.Background()
	s := openTyped(t, t.TempDir(), &otel.Spans)
	id := []string{"tenant_id", "trace_id", "span_id"}
	first := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "first")
	withIDs := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{7}, "with ids")
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, first, withIDs))
	if _, err := s.Dedup(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.RekeyDedupTargetAsBefore(ctx, id); err != nil { // the ids joined, a null marked
		t.Fatal(err)
	}
	second := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "second")
	load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 2, first, second, withIDs))
	res, err := s.Dedup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rows, perKey := dedupRows(t, s, "otel_spans_dedup", "name")
	slices.Sort(rows)
	if want := []string{"first@0/0", "second@0/3", "with ids@0/1"}; res.Read != 3 || res.Inserted != 1 || !slices.Equal(rows, want) {
		t.Errorf("read %d, inserted %d, target %v; want 3, 1: %v", res.Read, res.Inserted, rows, want)
	}
	if perKey["team-a/01020300000000000000000000000000/0700000000000000"] != 1 {
		t.Errorf("keys %v: the span with its ids is not under its ids", perKey)
	}
	checkCounts(t, s, iceberg.DedupCounts{Rows: 5, Identities: 3, Kept: 3, Pending: 0})
}
