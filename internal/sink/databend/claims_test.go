package databend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// docs/OPERATIONS.md's way to start a partition over (its topic deleted
// and recreated): delete the partition's ledger rows and its rows. Claims
// named by the ledger position read (-1 first) named the old log's
// markers, which the fence table's load history still has, so every claim
// was skipped; after three loads the marker was copied with FORCE = TRUE,
// which claims nothing (a forced file never conflicts at commit). Two
// processes loading the partition at once (a revoke that did not wait, a
// member that lost its session) then both committed, and the offsets they
// share were stored twice. Claims are numbered by the fence table's count
// now.
func TestClaimsFenceAfterAPartitionIsStartedOver(t *testing.T) {
	loadStartedOver(t, 2)
}

// A partition started over after its claims were pruned: its claims go
// on past the highest the fence table kept, never naming a marker the
// load history has, and two processes loading the new log at once store
// each offset once.
func TestClaimsFenceAfterAPrunedPartitionIsStartedOver(t *testing.T) {
	loadStartedOver(t, databend.PruneEvery+2)
}

// loadStartedOver loads partition 0 in loads loads of ten offsets, starts
// it over as docs/OPERATIONS.md says (deletes its ledger rows and its
// rows) and has two processes load the new log at once (loadDuring).
// Every claim after the start over must be numbered past every claim
// before it, and no number be in the fence table twice.
func loadStartedOver(t *testing.T, loads int64) {
	t.Helper()
	srv, old := prepared(t, "")
	ctx := context.Background()
	for i := range loads {
		b := batch(0, 10*i, 10*i+9)
		if _, err := old.Load(ctx, stage(t, old, b)); err != nil {
			t.Fatal(err)
		}
	}
	highest := slices.Max(fenceClaims(t, srv, 0))
	if n := len(srv.Rows("trace_raw_fence")); loads > databend.PruneEvery && n >= int(loads) {
		t.Fatalf("%d fence rows after %d loads: not pruned", n, loads)
	}
	// The operator starts partition 0 over.
	inPartition0 := func(col string) func(databendtest.Row) bool {
		return func(r databendtest.Row) bool {
			var p int64
			_ = json.Unmarshal(r[col], &p)
			return p == 0
		}
	}
	srv.RemoveRows("trace_raw", inPartition0("kpartition"))
	srv.RemoveRows("trace_raw_ledger", inPartition0("partition"))
	kept := map[int64]bool{}
	for _, c := range fenceClaims(t, srv, 0) {
		kept[c] = true
	}

	// Two processes (fresh sinks) load the new log at once.
	former, owner := open(t, srv, ""), open(t, srv, "")
	// Staged names are unique per staging (the pipeline's batch ids).
	fb, ob := batch(0, 0, 9), batch(0, 0, 14)
	fb.ID, ob.ID = "former1", "owner1"
	formerFiles := stage(t, former, fb)
	ownerFiles := stage(t, owner, ob)
	// The new owner loads once the former owner's rows are copied (its
	// claim went through).
	loadDuring(t, srv, former, formerFiles, owner, ownerFiles, func(sql string) bool {
		return strings.HasPrefix(sql, `COPY INTO "trace_raw" `)
	})
	// The claims not kept from before (a process's first load may prune
	// some of those), and no number twice.
	seen := map[int64]bool{}
	for _, c := range fenceClaims(t, srv, 0) {
		if seen[c] {
			t.Errorf("claim %d of partition 0 is in the fence table twice", c)
		}
		seen[c] = true
		if !kept[c] && c <= highest {
			t.Errorf("a claim after the start over is numbered %d, not past %d, the highest before", c, highest)
		}
	}
}

// fenceClaims returns the claim numbers of partition p's rows in the
// fence table, in the order they were committed (-1 for a row without a
// number).
func fenceClaims(t *testing.T, srv *databendtest.Server, p int64) []int64 {
	t.Helper()
	var out []int64
	for _, r := range srv.Rows("trace_raw_fence") {
		var part int64
		_ = json.Unmarshal(r["partition"], &part)
		if part != p {
			continue
		}
		c := int64(-1)
		if v, ok := r["claim"]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &c); err != nil {
				t.Fatalf("claim %s: %v", v, err)
			}
		}
		out = append(out, c)
	}
	return out
}

// A claim is numbered by the fence table's count read before the ledger:
// a load that lands between the two reads took the number, so the later
// load's claim is skipped and it loads again from fresh reads. (Read the
// other way round, a ledger read older than the count let a second claim
// through, and both loads stored the offsets they share.)
func TestClaimNumberedBeforeTheLedgerRead(t *testing.T) {
	srv, former := prepared(t, "")
	owner := open(t, srv, "")
	formerFiles := stage(t, former, batch(0, 0, 9))
	ownerFiles := stage(t, owner, batch(0, 0, 14))
	// The former owner's load read the first of claims and ledger; the
	// new owner's load lands before its second read.
	loadDuring(t, srv, former, formerFiles, owner, ownerFiles, func(sql string) bool {
		return strings.HasPrefix(sql, `SELECT topic, "partition", `) && strings.Contains(sql, `"trace_raw_`)
	})
}

// loadDuring loads the former owner's files of partition 0 while the new
// owner loads its files (offsets 0..14) in full, at the first statement
// of the former's load that at matches (then runs each of then), each
// retrying as the pipeline does; every offset must be stored once.
func loadDuring(t *testing.T, srv *databendtest.Server, former *databend.Sink, formerFiles []sink.File, owner *databend.Sink, ownerFiles []sink.File, at func(sql string) bool, then ...func()) {
	t.Helper()
	ctx := context.Background()
	moved := false
	srv.After = func(sql string) {
		if !moved && at(sql) {
			moved = true // before the owner's load, whose statements come here too
			if err := loadRetrying(ctx, owner, ownerFiles); err != nil {
				t.Error(err)
			}
			for _, f := range then {
				f()
			}
		}
	}
	if err := loadRetrying(ctx, former, formerFiles); err != nil {
		t.Fatal(err)
	}
	if !moved {
		t.Fatal("the new owner never loaded during the former owner's load")
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 14)) {
		t.Errorf("offsets %v; want 0..14 once", o)
	}
}

// loadRetrying loads files as the pipeline does: again after a retryable
// failure.
func loadRetrying(ctx context.Context, s *databend.Sink, files []sink.File) error {
	var err error
	for range 6 {
		if _, err = s.Load(ctx, files); err == nil || errors.Is(err, sink.ErrFatal) {
			return err
		}
	}
	return err
}

// A claim excludes another only while Databend's load history keeps its
// marker: databend-query upserts a copied file's key with the TTL
// load_file_metadata_expire_hours (builder_copy_into_table.rs
// build_upsert_copied_files_to_meta_req; default 24, scope Both), set in
// the DSN or by an administrator's SET GLOBAL. A former owner's load that
// read claims and ledger and then stood still (a paused process: its
// transaction lives idle_transaction_timeout_secs, 4 h by default) for
// longer than that TTL found the new owner's marker forgotten, copied it,
// committed, and the offsets both loaded were stored twice. A DSN that
// sets a shorter TTL is refused (settings.go); SET GLOBAL is overridden.
func TestClaimOutlivesAShortLoadHistory(t *testing.T) {
	srv, former := prepared(t, "")
	_, err := databend.Open(databend.Options{DSN: srv.DSN("load_file_metadata_expire_hours=1"), Table: "trace_raw", Stage: "~"})
	if err == nil || !strings.Contains(err.Error(), "load_file_metadata_expire_hours: want at least 24") {
		t.Errorf("a DSN with a 1 h load history: open error %v, want it refused", err)
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"load_file_metadata_expire_hours": "1"} })
	owner := open(t, srv, "")
	formerFiles := stage(t, former, batch(0, 0, 9))
	ownerFiles := stage(t, owner, batch(0, 0, 14))
	// The former owner read the claims and the ledger, then stood still
	// for two hours, in which the new owner loaded.
	loadDuring(t, srv, former, formerFiles, owner, ownerFiles, func(sql string) bool {
		return strings.HasPrefix(sql, `SELECT topic, "partition", max(last_offset) FROM "trace_raw_ledger"`)
	}, func() { srv.Advance(2 * time.Hour) })
}

// A claim's marker whose row the fence table rejected (ON_ERROR =
// CONTINUE) was taken for a claim (loaded or rejected, as a data file):
// the load committed, its marker in the load history and no row counted,
// so every later load of the partition named that marker again, was
// skipped, and retried for ever.
func TestClaimWhoseRowIsRejectedIsNoClaim(t *testing.T) {
	srv, s := prepared(t, "")
	ctx := context.Background()
	rejected := false
	srv.Set(func() {
		srv.Reject = func(table string, r databendtest.Row) string {
			if table == "trace_raw_fence" && !rejected {
				rejected = true
				return "fail to decode column after_offset"
			}
			return ""
		}
	})
	_ = loadRetrying(ctx, s, stage(t, s, batch(0, 0, 9)))
	if err := loadRetrying(ctx, s, stage(t, s, batch(0, 10, 19))); err != nil {
		t.Fatalf("the next load: %v", err)
	}
}

// An administrator's query result cache in its inconsistent mode (SET
// GLOBAL enable_query_result_cache = 1, query_result_cache_allow_inconsistent
// = 1) answers a statement run before with its old result, whatever was
// written since (storages/basic/src/result_cache/read/reader.rs). The
// claim count and the ledger read by one load were then the previous
// load's: its claim named a marker already copied, and the partition's
// next loads were skipped for ever. Sessions turn the cache off.
func TestLoadsReadPastTheQueryResultCache(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() {
		srv.GlobalSettings = map[string]string{"enable_query_result_cache": "1",
			"query_result_cache_allow_inconsistent": "1", "query_result_cache_min_execute_secs": "0"}
	})
	ctx := context.Background()
	for _, b := range []*sink.Batch{batch(0, 0, 9), batch(0, 10, 19), batch(0, 20, 29)} {
		if err := loadRetrying(ctx, s, stage(t, s, b)); err != nil {
			t.Fatalf("load of offsets %d–%d: %v", b.Ranges[0].First, b.Ranges[0].Last, err)
		}
	}
	if n := len(srv.Rows("trace_raw")); n != 30 {
		t.Errorf("%d rows stored, want 30", n)
	}
}

// Every load added a row for each partition it claims to <table>_fence,
// never deleted, and every load's claim read counted all of them: at a
// load a second of 100 partitions the table gained ~10M rows a day and
// loads grew slower each day. Claims are numbered now and the rows below
// a partition's highest are pruned: the table holds a few rows per
// partition, and the numbering goes on past the pruned rows.
func TestFenceKeepsAFewClaimsPerPartition(t *testing.T) {
	srv, s := prepared(t, "")
	ctx := context.Background()
	const loads = 48
	for i := range int64(loads) {
		if err := loadRetrying(ctx, s, stage(t, s, batch(0, 10*i, 10*i+9))); err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
	}
	// A prune every 16 loads keeps the claims read since (claim.go,
	// pruneEvery): at most 16 loads' and the highest before them.
	const most = 18
	if n := len(srv.Rows("trace_raw_fence")); n > most {
		t.Errorf("the fence table holds %d rows after %d loads of one partition; want at most %d", n, loads, most)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 10*loads-1)) {
		t.Errorf("offsets %v; want 0..%d once", o, 10*loads-1)
	}
	// The last load's claim is numbered past every earlier one.
	last := ""
	for _, st := range srv.Statements() {
		if strings.HasPrefix(st, `COPY INTO "trace_raw_fence"`) {
			last = st
		}
	}
	if want := fmt.Sprintf("-0-%d.ndjson.zst'", loads-1); !strings.Contains(last, want) {
		t.Errorf("the last claim: %s; want its marker numbered %d", last, loads-1)
	}
}

// A fence table of a release that numbered a claim by counting the
// partition's rows (no claim column): Prepare adds the column, its rows
// read NULL there and count as that release counted them. A load of that
// release still in flight when its process stopped (its COMMIT on its
// way) named the marker of the count it read, and this release's first
// load of the partition must name the same one, whichever of them
// commits first; the rows without a number are pruned only once a
// numbered claim is above them.
func TestUpgradedFenceCollidesWithAnOlderReleasesClaim(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	s := open(t, srv, "")
	if err := s.Exec(ctx, `CREATE TABLE IF NOT EXISTS "trace_raw_fence" (topic VARCHAR, "partition" INT, after_offset BIGINT)`); err != nil {
		t.Fatal(err)
	}
	p0, p1 := sink.TopicPartition{Topic: "traces", Partition: 0}, sink.TopicPartition{Topic: "traces", Partition: 1}
	for _, tp := range []sink.TopicPartition{p0, p0, p0, p1, p1} {
		_, commit, err := s.OldReleaseClaim(ctx, tp)
		if err == nil {
			err = commit()
		}
		if err != nil {
			t.Fatalf("the older release's claim of %s: %v", tp, err)
		}
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare over the older release's fence table: %v", err)
	}
	if cols := srv.Columns("trace_raw_fence"); !slices.Contains(cols, "claim BIGINT") {
		t.Fatalf("fence columns %v: want claim added", cols)
	}

	// Partition 0: the older release's claim commits after this load read
	// the claims. Both named marker 3; the load loses it and claims 4.
	n, commitOld, err := s.OldReleaseClaim(ctx, p0)
	if err != nil {
		t.Fatal(err)
	}
	done := false
	srv.After = func(sql string) {
		if !done && strings.HasPrefix(sql, `SELECT topic, "partition", count(*), max(claim)`) {
			done = true
			if err := commitOld(); err != nil {
				t.Errorf("the older release's COMMIT: %v", err)
			}
		}
	}
	if err := loadRetrying(ctx, s, stage(t, s, batch(0, 0, 9))); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() { srv.After = nil })
	marker := fmt.Sprintf(`-0-%d.ndjson.zst'`, n)
	if copies := countStatements(srv, `COPY INTO "trace_raw_fence"`, marker); n != 3 || copies != 2 {
		t.Errorf("the older release counted %d claims and %d COPYs named its marker; want 3, by it and by the load", n, copies)
	}
	if c := fenceClaims(t, srv, 0); !slices.Equal(c, []int64{-1, -1, -1, -1, 4}) {
		t.Errorf("partition 0's claims %v; want four without a number, then 4", c)
	}

	// Partition 1: this release's load commits first; the older
	// release's COMMIT fails on the marker both named.
	n, commitOld, err = s.OldReleaseClaim(ctx, p1)
	if err != nil {
		t.Fatal(err)
	}
	if err := loadRetrying(ctx, s, stage(t, s, batch(1, 0, 9))); err != nil {
		t.Fatal(err)
	}
	if err := commitOld(); err == nil || !strings.Contains(err.Error(), "DuplicatedUpsertFiles") {
		t.Errorf("the older release's COMMIT of claim %d after the load's: %v; want DuplicatedUpsertFiles", n, err)
	}
	if c := fenceClaims(t, srv, 1); !slices.Equal(c, []int64{-1, -1, 2}) {
		t.Errorf("partition 1's claims %v; want two without a number, then 2", c)
	}

	// Loads of partition 0 only, enough for a prune: its rows without a
	// number go, partition 1's stay (no claim above them was read).
	for i := range int64(databend.PruneEvery) {
		if err := loadRetrying(ctx, s, stage(t, s, batch(0, 10+10*i, 19+10*i))); err != nil {
			t.Fatal(err)
		}
	}
	c := fenceClaims(t, srv, 0)
	if slices.Contains(c, -1) || len(c) > databend.PruneEvery || c[len(c)-1] != 4+databend.PruneEvery {
		t.Errorf("partition 0's claims after a prune %v; want none without a number, fewer than %d, up to %d", c, databend.PruneEvery, 4+databend.PruneEvery)
	}
	if c := fenceClaims(t, srv, 1); !slices.Equal(c, []int64{-1, -1, 2}) {
		t.Errorf("partition 1's claims after a prune of partition 0 %v; want two without a number, then 2", c)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9+10*databend.PruneEvery)) {
		t.Errorf("partition 0 offsets %v", o)
	}
}

// countStatements counts the statements received that begin with prefix
// and hold part.
func countStatements(srv *databendtest.Server, prefix, part string) int {
	n := 0
	for _, st := range srv.Statements() {
		if strings.HasPrefix(st, prefix) && strings.Contains(st, part) {
			n++
		}
	}
	return n
}

// databend-query writes a NULL in a reply as the string NULL where the
// session's format_null_as_str is 1: the default of the servers of
// v1.2.6xx to mid-2025 (databendlabs/databend#16120, #18026), and a
// setting of scope Both an administrator's SET GLOBAL or the DSN may
// turn on. The claim read of an upgraded fence table, max(claim) over
// rows without a number, is NULL: read as "NULL" it failed every load of
// the partition, for ever (no numbered claim could ever commit).
func TestClaimReadOfAnUpgradedFenceWhereNullIsWrittenAsAString(t *testing.T) {
	for _, c := range []struct {
		name, dsn string
		global    map[string]string
	}{
		{"SET GLOBAL", "", map[string]string{"format_null_as_str": "1"}},
		// A DSN that sets it is refused (settings.go).
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := databendtest.New("tl", "s3cret")
			t.Cleanup(srv.Close)
			srv.Set(func() { srv.GlobalSettings = c.global })
			ctx := context.Background()
			s := open(t, srv, c.dsn)
			if err := s.Exec(ctx, `CREATE TABLE IF NOT EXISTS "trace_raw_fence" (topic VARCHAR, "partition" INT, after_offset BIGINT)`); err != nil {
				t.Fatal(err)
			}
			tp := sink.TopicPartition{Topic: "traces", Partition: 0}
			for range 2 {
				_, commit, err := s.OldReleaseClaim(ctx, tp)
				if err == nil {
					err = commit()
				}
				if err != nil {
					t.Fatalf("the older release's claim: %v", err)
				}
			}
			if err := s.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			if err := loadRetrying(ctx, s, stage(t, s, batch(0, 0, 9))); err != nil {
				t.Fatalf("the first load after the upgrade: %v", err)
			}
			if c := fenceClaims(t, srv, 0); !slices.Equal(c, []int64{-1, -1, 2}) {
				t.Errorf("claims %v; want two without a number, then 2", c)
			}
			if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9)) {
				t.Errorf("offsets %v; want 0..9", o)
			}
		})
	}
}

// Two processes of a release that adds a column (the fence table's
// claim, a declared table's new column) starting at once, as replicas
// after an upgrade do: both DESC the table without it, both ALTER it,
// and databend-query answers the second ALTER AddColumnExistError 1108
// (expression/src/schema.rs TableSchema::add_columns). That Prepare
// failed, fatal, and its process stopped at start.
func TestPrepareBesideAnotherAddingTheSameColumn(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	ctx := context.Background()
	first, second := open(t, srv, ""), open(t, srv, "")
	if err := first.Exec(ctx, `CREATE TABLE IF NOT EXISTS "trace_raw_fence" (topic VARCHAR, "partition" INT, after_offset BIGINT)`); err != nil {
		t.Fatal(err)
	}
	done := false
	srv.After = func(sql string) {
		if !done && sql == `DESC "trace_raw_fence"` {
			done = true // before the second's statements, which come here too
			if err := second.Prepare(ctx); err != nil {
				t.Errorf("the second process's Prepare: %v", err)
			}
		}
	}
	if err := first.Prepare(ctx); err != nil {
		t.Errorf("the first process's Prepare, the second adding the column meanwhile: %v", err)
	}
	if !done {
		t.Fatal("the second process never prepared during the first's Prepare")
	}
	if cols := srv.Columns("trace_raw_fence"); !slices.Equal(cols, []string{"topic VARCHAR", "partition INT", "after_offset BIGINT", "claim BIGINT"}) {
		t.Errorf("fence columns %v: want claim added once", cols)
	}
	if _, err := first.Load(ctx, stage(t, first, batch(0, 0, 9))); err != nil {
		t.Fatal(err)
	}
}
