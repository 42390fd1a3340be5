package databend_test

import (
	"context"
	"encoding/json"
	"errors"
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
	srv, old := prepared(t, "")
	ctx := context.Background()
	for _, b := range []*sink.Batch{batch(0, 0, 9), batch(0, 10, 19)} {
		if _, err := old.Load(ctx, stage(t, old, b)); err != nil {
			t.Fatal(err)
		}
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
// committed, and the offsets both loaded were stored twice.
func TestClaimOutlivesAShortLoadHistory(t *testing.T) {
	for _, c := range []struct {
		name, dsn string
		global    map[string]string
	}{
		{"dsn", "load_file_metadata_expire_hours=1", nil},
		{"set global", "", map[string]string{"load_file_metadata_expire_hours": "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, former := prepared(t, c.dsn)
			srv.Set(func() { srv.GlobalSettings = c.global })
			owner := open(t, srv, c.dsn)
			formerFiles := stage(t, former, batch(0, 0, 9))
			ownerFiles := stage(t, owner, batch(0, 0, 14))
			// The former owner read the claims and the ledger, then stood
			// still for two hours, in which the new owner loaded.
			loadDuring(t, srv, former, formerFiles, owner, ownerFiles, func(sql string) bool {
				return strings.HasPrefix(sql, `SELECT topic, "partition", max(last_offset) FROM "trace_raw_ledger"`)
			}, func() { srv.Advance(2 * time.Hour) })
		})
	}
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
