package iceberg_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// everyDay has every day partition ended, the current one too.
var everyDay = time.Now().Add(48 * time.Hour)

func TestMaintenanceLocal(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, false)
	maintain(t, s, filepath.Join(dir, "warehouse", "tracelake.db"))
}

func TestMaintenanceS3(t *testing.T) {
	s3 := icebergtest.StartS3(t, "lake")
	maintain(t, openS3Sink(t, s3), filepath.Join(s3.Root, "lake", "warehouse", "tracelake.db"))
}

// maintain compacts, expires and cleans a table of ten small loads, and
// checks after each step that every row is there once, the positions are
// the same and the fence still holds. root is the namespace's directory
// on disk.
func maintain(t *testing.T, s *iceberg.Sink, root string) {
	ctx := context.Background()
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(5) {
		load(t, s, batch(0, i*20, i*20+19, i*20+3))
		load(t, s, batch(1, i*20, i*20+19))
	}
	want := map[int32][]int64{0: seq(0, 99, 3, 23, 43, 63, 83), 1: seq(0, 99)}
	wantDLQ := map[int32][]int64{0: {3, 23, 43, 63, 83}}
	before, err := s.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(step string) {
		t.Helper()
		if got := stored(t, s, false); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("after %s: raw offsets %v", step, got)
		}
		if got := stored(t, s, true); !maps.EqualFunc(got, wantDLQ, slices.Equal) {
			t.Errorf("after %s: dead-letter offsets %v", step, got)
		}
		after, err := s.AllPositions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(before, after) {
			t.Errorf("after %s: positions %v, were %v", step, after, before)
		}
	}
	parquet := func() int {
		t.Helper()
		n := 0
		_ = filepath.WalkDir(root, func(path string, _ os.DirEntry, _ error) error {
			if strings.HasSuffix(path, ".parquet") {
				n++
			}
			return nil
		})
		return n
	}

	planned, err := s.Compact(ctx, 64<<20, everyDay, true)
	if err != nil {
		t.Fatal(err)
	}
	if planned[0].FilesBefore != 10 || planned[1].FilesBefore != 5 || parquet() != 15 {
		t.Fatalf("dry run planned %+v, %d files on disk; want 10 raw and 5 dead-letter files planned, 15 on disk", planned, parquet())
	}
	// A load commits between the compaction's read of the table and its
	// commit: the compaction loses the race, re-reads and commits after.
	raced := false
	s.SetBeforeMaintenanceCommit(func() {
		if !raced {
			raced = true
			load(t, s, batch(1, 100, 119))
		}
	})
	done, err := s.Compact(ctx, 64<<20, everyDay, false)
	s.SetBeforeMaintenanceCommit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if done[0].FilesAfter != 1 || done[1].FilesAfter != 1 {
		t.Errorf("compaction %+v: want one file per table (one day)", done)
	}
	want[1] = seq(0, 119)
	if ops, err := s.Operations(ctx); err != nil || ops[len(ops)-1] != "replace" {
		t.Errorf("snapshot operations %v (%v): a compaction changes no data, its snapshot is a replace", ops, err)
	}
	if before, err = s.AllPositions(ctx); err != nil {
		t.Fatal(err)
	}
	unchanged("compact")
	if got := unreferenced(t, s, root); len(got) != 15 {
		t.Errorf("%d files no longer referenced after compaction, want the 15 rewritten ones", len(got))
	}

	exp, err := s.Expire(ctx, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if exp[0].Remain != 1 || exp[0].Expired != 11 {
		t.Errorf("expire %+v: want 11 of the 12 raw snapshots (11 loads, the compaction) expired", exp)
	}
	unchanged("expire")
	if got := unreferenced(t, s, root); len(got) != 0 {
		t.Errorf("expire left %d unreferenced data files: %v", len(got), got)
	}

	// The fence holds after maintenance: an old batch adds nothing, a new
	// one lands.
	load(t, s, batch(1, 40, 59))
	unchanged("replaying an old batch")

	// An orphan (a crashed writer's file) and every real file, 8 days old.
	orphan := filepath.Join(root, "trace_raw", "data", "add_day=2026-01-01", "00000-0-orphan.parquet")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("PAR1 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-8 * 24 * time.Hour)
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Chtimes(path, old, old)
		}
		return err
	})
	if _, err := s.RemoveOrphans(ctx, time.Minute, true); err == nil {
		t.Error("a grace period of a minute was accepted")
	}
	listed, err := s.RemoveOrphans(ctx, 7*24*time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	// Besides the planted file, the manifests the compaction wrote for its
	// lost attempt are orphans too; no data file is.
	if !slices.ContainsFunc(listed[0].Files, func(f string) bool { return strings.HasSuffix(f, "00000-0-orphan.parquet") }) ||
		listed[0].Deleted != 0 || len(listed[1].Files) != 0 {
		t.Fatalf("dry run found %+v, want the planted orphan, not deleted", listed)
	}
	for _, f := range listed[0].Files {
		if !strings.HasSuffix(f, "00000-0-orphan.parquet") && !(strings.Contains(f, "/metadata/") && strings.HasSuffix(f, ".avro")) {
			t.Errorf("dry run lists %s as an orphan", f)
		}
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("dry run deleted the orphan: %v", err)
	}
	removed, err := s.RemoveOrphans(ctx, 7*24*time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if removed[0].Deleted != len(listed[0].Files) {
		t.Errorf("cleanup %+v, want the %d orphans of the dry run deleted", removed, len(listed[0].Files))
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan still there: %v", err)
	}
	unchanged("orphan cleanup")
}

// Another engine deletes a row (copy-on-write: its file is rewritten)
// between a compaction's read of the table and its commit: that group is
// left alone, since committing it would bring the row back; the other
// table is compacted; the run does not fail.
func TestCompactionLeavesAGroupAnotherWriterChanged(t *testing.T) {
	ctx := context.Background()
	s := withLoads(t, 4, true)
	deleted := false
	s.SetBeforeMaintenanceCommit(func() {
		if !deleted {
			deleted = true
			if err := s.DeleteRaw(ctx, 0, 15); err != nil {
				t.Error(err)
			}
		}
	})
	done, err := s.Compact(ctx, 64<<20, everyDay, false)
	s.SetBeforeMaintenanceCommit(nil)
	if err != nil {
		t.Fatalf("compaction failed instead of leaving the changed group: %v", err)
	}
	if got, want := stored(t, s, false)[0], seq(0, 39, 3, 13, 15, 23, 33); !slices.Equal(got, want) {
		t.Errorf("raw offsets %v, want %v: the deleted row came back or a row was lost", got, want)
	}
	if done[0].FilesAfter != 0 || done[1].FilesAfter != 1 {
		t.Errorf("compaction %+v: want the raw group left, the dead-letter table compacted", done)
	}
	ops, err := s.Operations(ctx)
	if err != nil || slices.Contains(ops, "replace") {
		t.Errorf("raw snapshots %v (%v): no compaction may commit on the raw table", ops, err)
	}
}

// Broke: on a table someone set commit.retry.num-retries on (another
// engine, or a user, after tracelake started), iceberg-go replayed a
// compaction commit that lost a race onto the table as it then stood,
// bypassing the compaction's own check of its group (unchangedSince).
// Rows stayed right only because iceberg-go's replay refuses a rewrite of
// files gone from the table; it refused it with an error that is not a
// lost race, so the compaction took its outcome for unknown: the run
// failed (the rest of the maintenance round skipped) instead of leaving
// the group, as it does on every other table. A compaction commit is
// pinned to the snapshot it checked its group on, as a load's.
func TestCompactionOnAReplayingTableLeavesAGroupAnotherWriterChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		race func(t *testing.T, other *iceberg.Sink)
		want []int64
	}{
		{"another engine's DELETE", func(t *testing.T, other *iceberg.Sink) {
			if err := other.DeleteRaw(context.Background(), 0, 15); err != nil {
				t.Error(err)
			}
		}, seq(0, 39, 15)},
		{"another engine's merge-on-read DELETE", func(t *testing.T, other *iceberg.Sink) {
			// Position deletes on the group's file, not a file rewritten.
			if err := other.SetTableProperty(context.Background(), "write.delete.mode", "merge-on-read"); err != nil {
				t.Fatal(err)
			}
			if err := other.DeleteRaw(context.Background(), 0, 15); err != nil {
				t.Error(err)
			}
		}, seq(0, 39, 15)},
		{"another process's compaction", func(t *testing.T, other *iceberg.Sink) {
			if _, err := other.Compact(context.Background(), 64<<20, everyDay, false); err != nil {
				t.Error(err)
			}
		}, seq(0, 39)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// Through the REST catalog: its 409 is the conflict iceberg-go replays.
			rest := icebergtest.StartREST(t, openSink(t, t.TempDir(), false).Catalog(), "token")
			s, other := openREST(t, rest.URL, "tracelake", "token"), openREST(t, rest.URL, "tracelake", "token")
			if err := s.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range int64(4) {
				load(t, s, batch(0, i*10, i*10+9))
			}
			if err := s.SetTableProperty(ctx, table.CommitNumRetriesKey, "3"); err != nil {
				t.Fatal(err)
			}
			raced := false
			s.SetBeforeMaintenanceCommit(func() {
				if !raced {
					raced = true
					tc.race(t, other)
				}
			})
			done, err := s.Compact(ctx, 64<<20, everyDay, false)
			s.SetBeforeMaintenanceCommit(nil)
			if err != nil {
				t.Fatalf("compaction failed instead of leaving the changed group: %v", err)
			}
			if !raced {
				t.Fatal("the compaction committed nothing: the race did not run")
			}
			if got := stored(t, s, false)[0]; !slices.Equal(got, tc.want) {
				t.Errorf("raw offsets %v, want %v: a deleted row came back, or a row was lost or doubled", got, tc.want)
			}
			if done[0].FilesAfter != 0 {
				t.Errorf("compaction %+v: want the raw group left", done[0])
			}
		})
	}
}

// A REST catalog: the test server speaks the REST protocol and keeps the
// tables in a SQL catalog (see icebergtest.StartREST). Loads racing each
// other and maintenance racing a load go through 409 CommitFailed answers.
func TestRESTCatalog(t *testing.T) {
	dir := t.TempDir()
	backing := openSink(t, dir, false)
	rest := icebergtest.StartREST(t, backing.Catalog(), "secret-token")
	if s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: rest.URL, REST: iceberg.REST{Token: "wrong"},
		Namespace: "tracelake", Table: "trace_raw"}); err == nil {
		err = s.Prepare(context.Background())
		if err == nil || !strings.Contains(err.Error(), "unauthorized") {
			t.Errorf("a wrong token: %v", err)
		}
	}
	a, b := openREST(t, rest.URL, "tracelake", "secret-token"), openREST(t, rest.URL, "tracelake", "secret-token")
	if err := a.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	raceTwoWriters(t, a, b, filepath.Join(dir, "warehouse"))
	conflicts := rest.Conflicts.Load()
	if conflicts == 0 {
		t.Error("no commit was answered 409")
	}
	// A second pair of tables for the maintenance round.
	maintain(t, openREST(t, rest.URL, "maintained", "secret-token"), filepath.Join(dir, "warehouse", "maintained.db"))
}

func openREST(t *testing.T, url, namespace, token string) *iceberg.Sink {
	t.Helper()
	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: url, REST: iceberg.REST{Token: token},
		Namespace: namespace, Table: "trace_raw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stagedBehindREST is a sink in dir behind the REST test server, prepared,
// with a batch of offsets 0-9 of partition 0 staged (offset 4 a dead
// letter).
func stagedBehindREST(t *testing.T, dir string) (*icebergtest.REST, *iceberg.Sink, sink.File) {
	t.Helper()
	rest := icebergtest.StartREST(t, openSink(t, dir, false).Catalog(), "token")
	s := openREST(t, rest.URL, "tracelake", "token")
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := s.Stage(context.Background(), batch(0, 0, 9, 4))
	if err != nil {
		t.Fatal(err)
	}
	return rest, s, f
}

// A commit whose reply is lost may have landed: when the catalog cannot
// be asked either, its data files are kept (they are the table's now), and
// the pipeline's retry of the same load finds its rows stored and commits
// nothing again. Both tables' commits lose their reply once: the
// dead-letter table's on the first attempt, the raw table's on the second.
func TestCommitWithUnknownOutcome(t *testing.T) {
	dir := t.TempDir()
	rest, s, f := stagedBehindREST(t, dir)
	rest.GoneAfterLostReply.Store(true)
	rest.LoseCommitReplies.Store(2)
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := s.Load(context.Background(), []sink.File{f})
		if err == nil || iceberg.LostRace(err) {
			t.Fatalf("attempt %d: %v, want an error of unknown outcome", attempt, err)
		}
	}
	if n := rest.LoseCommitReplies.Load(); n != 0 {
		t.Fatalf("%d lost replies left; want both commits to have landed", n)
	}
	l, err := s.Load(context.Background(), []sink.File{f})
	if err != nil {
		t.Fatalf("retry after the lost replies: %v", err)
	}
	if len(l.Ranges) != 1 || l.Ranges[0].Last != 9 {
		t.Errorf("retry loaded %+v, want partition 0 through offset 9", l.Ranges)
	}
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 9, 4)) {
		t.Errorf("raw offsets = %v", got)
	}
	if got := stored(t, s, true)[0]; !slices.Equal(got, []int64{4}) {
		t.Errorf("dead-letter offsets = %v", got)
	}
	if left := unreferenced(t, s, filepath.Join(dir, "warehouse")); len(left) != 0 {
		t.Errorf("data files of the landed commits were treated as garbage or leaked: %v", left)
	}
	if pos, err := s.Positions(context.Background(), []sink.TopicPartition{{Topic: "traces", Partition: 0}}); err != nil || pos[sink.TopicPartition{Topic: "traces"}] != 10 {
		t.Errorf("positions = %v, %v; want next offset 10", pos, err)
	}
}

// A load whose raw commit landed with its reply lost, the catalog then
// unreachable to read it back, is tried again after a maintenance round
// expired the snapshot it committed (expire_after 0, another writer's
// commit having replaced it as current). The retry found the positions
// past its batch and no snapshot of its load id left, and counted the
// batch as another load's (0 rows stored): the OTLP receivers answer
// such requests with a retry, and their clients stored every span twice.
// The load ids of the commits that moved each partition's position are
// kept where expiry cannot take them.
func TestRetryFindsItsCommitAfterItsSnapshotExpired(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, f := landedWithRepliesLost(t, dir)
	// Another writer commits to both tables, then maintenance expires
	// every snapshot but the current one.
	other := openSink(t, dir, false)
	load(t, other, batch(1, 0, 9, 5))
	if _, err := other.Expire(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	retryCountsItsOwn(t, s, f)
}

// landedWithRepliesLost stages a batch (offsets 0-9 of partition 0, 4 a
// dead letter) in a sink behind a REST catalog in dir and tries its load
// twice: both tables' commits land, their replies lost, the catalog then
// unreachable to read them back.
func landedWithRepliesLost(t *testing.T, dir string) (*iceberg.Sink, sink.File) {
	t.Helper()
	ctx := context.Background()
	rest, s, f := stagedBehindREST(t, dir)
	rest.GoneAfterLostReply.Store(true)
	rest.LoseCommitReplies.Store(2) // both tables' commits land, both replies lost
	if _, err := s.Load(ctx, []sink.File{f}); err == nil || iceberg.LostRace(err) {
		t.Fatalf("first attempt: %v, want an error of unknown outcome", err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err == nil || iceberg.LostRace(err) {
		t.Fatalf("second attempt: %v, want an error of unknown outcome", err)
	}
	if n := rest.LoseCommitReplies.Load(); n != 0 {
		t.Fatalf("%d lost replies left; want both commits to have landed", n)
	}
	return s, f
}

// retryCountsItsOwn tries the load of landedWithRepliesLost again: it
// succeeds, its rows counted as stored, and stored once.
func retryCountsItsOwn(t *testing.T, s *iceberg.Sink, f sink.File) {
	t.Helper()
	l, err := s.Load(context.Background(), []sink.File{f})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 9 || l.Ranges[0].DLQ != 1 {
		t.Errorf("retry loaded %#v, want its own 9 rows and dead letter counted as stored", l.Ranges)
	}
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 9, 4)) {
		t.Errorf("raw offsets = %v", got)
	}
}

// A commit whose reply is lost is read back: the table shows it landed,
// and the load succeeds at once, both tables' commits with it. Failed, its
// last attempt left its rows stored under an error (an OTLP request
// answered 503, stored, and stored again by its client's retry).
func TestCommitWhoseReplyWasLostIsReadBack(t *testing.T) {
	rest, s, f := stagedBehindREST(t, t.TempDir())
	rest.LoseCommitReplies.Store(2)
	l, err := s.Load(context.Background(), []sink.File{f})
	if err != nil {
		t.Fatalf("a load whose commits landed, their replies lost: %v", err)
	}
	if n := rest.LoseCommitReplies.Load(); n != 0 {
		t.Fatalf("%d lost replies left; want both commits to have landed", n)
	}
	if len(l.Ranges) != 1 || l.Ranges[0].Last != 9 || l.Ranges[0].Records != 9 || l.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v, want partition 0 through offset 9, 9 rows and a dead letter", l.Ranges)
	}
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 9, 4)) {
		t.Errorf("raw offsets = %v", got)
	}
	if got := stored(t, s, true)[0]; !slices.Equal(got, []int64{4}) {
		t.Errorf("dead-letter offsets = %v", got)
	}
}

// The REST catalog options people need for catalogs they run: OAuth2
// client credentials with a scope exchanged at an identity provider's
// token endpoint, and AWS SigV4 signing (Glue, S3 Tables).
func TestRESTCatalogAuthOptions(t *testing.T) {
	ctx := context.Background()
	rest := icebergtest.StartREST(t, openSink(t, t.TempDir(), false).Catalog(), "issued-token")
	var asked url.Values
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		asked = r.PostForm
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token": "issued-token", "token_type": "bearer", "expires_in": 3600}`)
	}))
	t.Cleanup(idp.Close)
	s, err := iceberg.Open(ctx, iceberg.Options{Catalog: rest.URL, Namespace: "oauth", Table: "trace_raw",
		REST: iceberg.REST{Credential: "client:secret", Scope: "lake:write", OAuth2ServerURI: idp.URL + "/token"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare with a token from the identity provider: %v", err)
	}
	if asked.Get("scope") != "lake:write" || asked.Get("client_id") != "client" || asked.Get("grant_type") != "client_credentials" {
		t.Errorf("token request %v: want client credentials with scope lake:write", asked)
	}

	rest.SigV4Scope.Store("eu-west-1/glue")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	signed, err := iceberg.Open(ctx, iceberg.Options{Catalog: rest.URL, Namespace: "signed", Table: "trace_raw",
		REST: iceberg.REST{SigV4: true, SigV4Region: "eu-west-1", SigV4Service: "glue"}})
	if err != nil {
		t.Fatal(err)
	}
	defer signed.Close()
	if err := signed.Prepare(ctx); err != nil {
		t.Fatalf("prepare with SigV4: %v", err)
	}
	load(t, signed, batch(0, 0, 9))
}

// The catalog name is stored with each table of a SQL catalog (engines
// reading the catalog database must use it), and table properties given
// in the config are set on the tables tracelake creates.
func TestCatalogNameAndTableProperties(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "trace_raw", CatalogName: "lake",
		TableProperties: map[string]string{"write.target-file-size-bytes": "1048576"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	props, err := s.RawProperties(ctx)
	if v := props["write.target-file-size-bytes"]; err != nil || v != "1048576" {
		t.Errorf("write.target-file-size-bytes = %q (%v), want the configured 1048576", v, err)
	}
	if v := props["commit.manifest-merge.enabled"]; v != "true" {
		t.Errorf("tracelake's own default lost: commit.manifest-merge.enabled = %q", v)
	}
	db, err := sql.Open(sqliteshim.ShimName, filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names []string
	rows, err := db.Query(`SELECT DISTINCT catalog_name FROM iceberg_tables`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if !slices.Equal(names, []string{"lake"}) {
		t.Errorf("catalog names stored %v, want [lake]", names)
	}
}

// The current day's partition takes loads all day: compaction leaves it
// alone until the day ended (the CLI's --min-age after that).
func TestCompactionLeavesTheCurrentDay(t *testing.T) {
	ctx := context.Background()
	s := withLoads(t, 3, false)
	done, err := s.Compact(ctx, 64<<20, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if done[0].Groups != 0 || done[0].FilesBefore != 0 {
		t.Errorf("compaction %+v: the current day was planned", done)
	}
	if ops, err := s.Operations(ctx); err != nil || slices.Contains(ops, "replace") {
		t.Errorf("snapshots %v (%v): the current day was rewritten", ops, err)
	}
}

// A compaction's files wait for its commit however long it takes (a whole
// day's partition can take longer than the grace period): `tracelake
// orphans` run meanwhile by another process took them for a crashed
// writer's and deleted them, and the commit then referenced files that
// were gone, losing every row of the day. They are in the compacting
// process's leases from when each is written until the commit.
func TestOrphansKeepACompactionsFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "warehouse")
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(4) {
		load(t, s, batch(0, i*10, i*10+9, i*10+3))
	}
	raw, dlq := stored(t, s, false), stored(t, s, true)
	cleaner := openSink(t, dir, false)
	commits := 0
	s.SetBeforeMaintenanceCommit(func() {
		commits++
		cleanAllAged(t, cleaner, root, "before the compaction's commit")
	})
	done, err := s.Compact(ctx, 64<<20, everyDay, false)
	s.SetBeforeMaintenanceCommit(nil)
	if err != nil {
		t.Fatal(err)
	}
	if commits != 2 || done[0].FilesAfter != 1 || done[1].FilesAfter != 1 {
		t.Fatalf("compaction %+v with %d commits: want both tables compacted", done, commits)
	}
	if got := stored(t, s, false); !maps.EqualFunc(got, raw, slices.Equal) {
		t.Errorf("raw offsets after compaction %v, were %v", got, raw)
	}
	if got := stored(t, s, true); !maps.EqualFunc(got, dlq, slices.Equal) {
		t.Errorf("dead-letter offsets after compaction %v, were %v", got, dlq)
	}
}

// noticeFiles is the local file system, listing included, telling
// onCreate (if set) of each file created and onOpen (if set) of each file
// opened, before it is.
type noticeFiles struct {
	icebergio.LocalFS
	onCreate, onOpen func(path string)
}

func (n noticeFiles) Create(path string) (icebergio.FileWriter, error) {
	if n.onCreate != nil {
		n.onCreate(path)
	}
	return n.LocalFS.Create(path)
}

func (n noticeFiles) Open(path string) (icebergio.File, error) {
	if n.onOpen != nil {
		n.onOpen(path)
	}
	return n.LocalFS.Open(path)
}

// hookCreates makes the local warehouse's file system call onCreate
// before it creates each file, for the rest of the test.
func hookCreates(t *testing.T, onCreate func(path string)) {
	useLocalFS(t, noticeFiles{onCreate: onCreate})
}

// useLocalFS makes fsys the local warehouse's file system for the rest
// of the test.
func useLocalFS(t *testing.T, fsys icebergio.IO) {
	for _, scheme := range []string{"", "file"} {
		icebergio.Unregister(scheme)
		icebergio.Register(scheme, func(context.Context, *url.URL, map[string]string) (icebergio.IO, error) {
			return fsys, nil
		})
		t.Cleanup(func() {
			icebergio.Unregister(scheme)
			icebergio.Register(scheme, func(context.Context, *url.URL, map[string]string) (icebergio.IO, error) {
				return icebergio.LocalFS{}, nil
			})
		})
	}
}

// A compaction file that another tool deleted (an orphan cleanup that
// reads no lease) before the commit fails the compaction before it
// commits, and the table keeps its files and rows: a commit must never
// reference a file that is gone.
func TestCompactionCommitsNoFileThatIsGone(t *testing.T) {
	ctx := context.Background()
	var compacting atomic.Bool
	var first string
	hookCreates(t, func(path string) {
		if !compacting.Load() || !strings.HasSuffix(path, ".parquet") {
			return
		}
		if first == "" {
			first = path
			return
		}
		if err := os.Remove(strings.TrimPrefix(first, "file://")); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(8) {
		load(t, s, batch(0, i*2000, i*2000+1999))
	}
	raw := stored(t, s, false)
	compacting.Store(true)
	_, err := s.Compact(ctx, 128<<10, everyDay, false)
	compacting.Store(false)
	if first == "" {
		t.Fatal("the compaction created no file")
	}
	if err == nil || !strings.Contains(err.Error(), "is gone before its commit") {
		t.Fatalf("compaction with a file gone: %v", err)
	}
	if got := stored(t, s, false); !maps.EqualFunc(got, raw, slices.Equal) {
		t.Errorf("raw offsets after the failed compaction %v, were %v", got, raw)
	}
}

// A table without a sort order (the raw and dead-letter tables, the
// derived and dedup tables; a span table's files with deletes) is
// compacted by iceberg-go's ExecuteCompactionGroup, which names its files
// only once it wrote them all: until then they were in no lease, so
// `tracelake orphans` run meanwhile (the lease renewed, the first files
// older than the grace) deleted them, and the compaction failed at its
// check before the commit, every time it outlasted the grace period.
func TestOrphansKeepAnUnsortedCompactionsFilesWhileItWrites(t *testing.T) {
	ctx := context.Background()
	var hook func(path string)
	hookCreates(t, func(path string) {
		if hook != nil {
			hook(path)
		}
	})
	dir := t.TempDir()
	root := filepath.Join(dir, "warehouse")
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range int64(8) {
		load(t, s, batch(0, i*2000, i*2000+1999, i*2000+3))
	}
	raw := stored(t, s, false)
	cleaner := openSink(t, dir, false)
	var compacting atomic.Bool
	var created atomic.Int32
	hook = func(path string) {
		if !compacting.Load() || !strings.HasSuffix(path, ".parquet") {
			return
		}
		if created.Add(1) != 2 {
			return
		}
		// A renewal tick, then orphan cleanup once the first file is
		// older than the grace period.
		if err := s.RenewLeases(ctx); err != nil {
			t.Error(err)
		}
		cleanAllAged(t, cleaner, root, "while the compaction was writing")
	}
	compacting.Store(true)
	done, err := s.Compact(ctx, 128<<10, everyDay, false)
	compacting.Store(false)
	if n := created.Load(); n < 2 {
		t.Fatalf("the compaction created %d files; the test needs two", n)
	}
	if err != nil {
		t.Fatal(err)
	}
	if done[0].FilesAfter < 2 {
		t.Fatalf("compaction %+v: want the raw table compacted into several files", done)
	}
	if got := stored(t, s, false); !maps.EqualFunc(got, raw, slices.Equal) {
		t.Errorf("raw offsets after compaction %v, were %v", got, raw)
	}
}

// cleanAllAged backdates every data file under root past the grace period
// and runs cleaner's orphan cleanup, which must delete nothing (when says
// when it ran).
func cleanAllAged(t *testing.T, cleaner *iceberg.Sink, root, when string) {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(root, func(path string, _ os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") {
			files = append(files, path)
		}
		return nil
	})
	backdate(t, older, files...)
	res, err := cleaner.RemoveOrphans(context.Background(), week, false)
	if err != nil {
		t.Error(err)
		return
	}
	for _, o := range res {
		if o.Deleted != 0 {
			t.Errorf("%s: orphan cleanup deleted %v %s", o.Table, o.Files, when)
		}
	}
}

// Expiry counts a snapshot's age from when another replaced it as the
// table's current: a table that took no commit for longer than the
// window and is then compacted keeps the snapshot it had until then, so
// a reader that loaded the table a moment before the round (tracelake
// serve reads the files of the snapshot it last loaded) still finds its
// files, and a time-travel query to the window's start finds the
// snapshot of then. Only the snapshot replaced before the window goes.
func TestExpireKeepsASnapshotCurrentWithinTheWindow(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, t.TempDir(), false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 19))
	load(t, s, batch(0, 20, 39))
	raw, _ := s.Identifiers()
	reader, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	read := reader.CurrentSnapshot()
	const window = 2 * time.Second
	// The table takes no commit for longer than the window (waiting on
	// the clock: the snapshot's age is the condition).
	for time.Since(time.UnixMilli(read.TimestampMs)) <= window {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Compact(ctx, 64<<20, everyDay, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expire(ctx, window, 1); err != nil {
		t.Fatal(err)
	}
	rows, err := reader.Scan(table.WithSnapshotID(read.SnapshotID)).ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("reading the snapshot that was current until the compaction a moment ago: %v", err)
	}
	defer rows.Release()
	if rows.NumRows() != 40 {
		t.Errorf("the snapshot current until a moment ago reads %d rows, want 40", rows.NumRows())
	}
	after, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.Metadata().Snapshots()); n != 2 {
		t.Errorf("%d snapshots remain, want 2: the compaction's and the one it replaced (the first load's, replaced before the window, expired)", n)
	}
}

// A load whose commits both landed with their replies lost, the catalog
// then unreachable, is retried after a catalog outage long enough for
// its batch to be looked up before the retry's commit (checkStagedAfter).
// Meanwhile another writer committed and maintenance compacted both
// tables and expired every snapshot but the current one: the files the
// load's own commits added are gone, as they may be (they are the tables'
// since those commits). The retry took them for staged files that orphan
// cleanup deleted and stopped the run (sink.ErrFatal, "nothing of the load
// was committed") over a load whose rows were all in. The retry finds its
// commits and counts its rows.
func TestRetryFindsItsCommitAfterMaintenanceReplacedItsFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, f := landedWithRepliesLost(t, dir)
	other := openSink(t, dir, false)
	load(t, other, batch(1, 0, 9, 5))
	if c, err := other.Compact(ctx, 64<<20, everyDay, false); err != nil || c[0].FilesBefore != 2 || c[1].FilesBefore != 2 {
		t.Fatalf("compaction %+v (%v): want both tables' 2 files compacted", c, err)
	}
	if _, err := other.Expire(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	s.AgeStaged(20 * time.Minute) // the retry comes after checkStagedAfter
	retryCountsItsOwn(t, s, f)
}
