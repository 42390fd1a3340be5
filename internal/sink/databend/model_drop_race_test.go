package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// Two processes set a model up at once after its target was dropped to
// be built again (two `tracelake run` restarted, or `tracelake merge`
// beside a run restarting): both find the target absent, and one of them
// makes it and merges while the other is still forgetting what the
// target dropped held. The one forgetting must not forget what the
// other's merge just wrote (its tombstones, its rejects) while that
// merge's watermarks stay: the rows below them are never read again, a
// key's delete is then forgotten and a change older than it, arriving
// later, brings the row back. Whatever the interleaving, the model must
// end as a merger alone builds it.
func TestModelSetUpTwiceAtOnceAfterItsTargetWasDroppedKeepsWhatWasMerged(t *testing.T) {
	// The statements of the second setup after which the first process
	// merges: each of the reset's steps.
	for _, at := range []string{
		"DROP TABLE IF EXISTS b_increment",
		"CREATE TABLE IF NOT EXISTS b_tombstones",
		"DELETE FROM tracelake_merge_watermarks WHERE model = 'b'",
		"DELETE FROM b_rejects",
	} {
		t.Run(at, func(t *testing.T) { setUpTwiceAtOnce(t, at) })
	}
}

func setUpTwiceAtOnce(t *testing.T, at string) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m, raw := raceModel(srv)

	// The second process's setup has found the target absent and has
	// run the statement at when the first one, which found it absent
	// too, makes it and merges, whole.
	var fired atomic.Bool
	var firstErr error
	srv.Set(func() {
		srv.After = func(sql string) {
			if strings.HasPrefix(strings.ReplaceAll(sql, `"`, ""), at) && fired.CompareAndSwap(false, true) {
				_, firstErr = merge.NewDatabendMerger(s, false).Merge(ctx, m)
			}
		}
	})
	second := merge.NewDatabendMerger(s, false)
	if _, err := second.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() { srv.After = nil })
	if !fired.Load() {
		t.Fatalf("the second setup ran no %q: the interleaving was not made", at)
	}
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	// A change older than key 1's delete arrives late, and both go on.
	raw(`{"o": 1, "v": 4, "op": "c", "x": 4}`)
	if _, err := second.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	wantAsOneMergerBuilds(t, srv, s, m, "after two setups at once")
}

// raceModel is model b (key o, version v, deletes, a BIGINT x) and a
// function appending a raw row (the next offset of partition 0) of doc,
// called with a key's change, its delete (a tombstone), a reject and
// another key's change.
func raceModel(srv *databendtest.Server) (config.Model, func(doc string)) {
	m := config.Model{Name: "b", Target: "b", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"o"}, Version: "v",
		Action: config.Action{Path: "$.op", Delete: []string{"d"}},
		Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "v", Path: "$.v", Type: "BIGINT"},
			{Name: "x", Path: "$.x", Type: "BIGINT"}}}.WithDefaults("trace_raw")
	offset := 0
	raw := func(doc string) {
		srv.AppendRow("trace_raw", databendtest.Row{"uuid": json.RawMessage(fmt.Sprintf(`"u%d"`, offset)), "koffset": json.RawMessage(fmt.Sprint(offset)),
			"kpartition": json.RawMessage("0"), "raw_data": json.RawMessage(doc), "record_metadata": json.RawMessage(`{"topic": "t"}`)})
		offset++
	}
	raw(`{"o": 1, "v": 5, "op": "c", "x": 1}`)
	raw(`{"o": 1, "v": 6, "op": "d"}`)              // a tombstone for key 1 at version 6
	raw(`{"o": 2, "v": 1, "op": "c", "x": "many"}`) // a reject
	raw(`{"o": 3, "v": 1, "op": "c", "x": 3}`)
	return m, raw
}

// wantAsOneMergerBuilds checks that model m (b), as merged so far, is
// the model one merger alone builds from the raw table: its target
// dropped and merged again. what says how it was merged.
func wantAsOneMergerBuilds(t *testing.T, srv *databendtest.Server, s *databend.Sink, m config.Model, what string) {
	t.Helper()
	got := modelState(srv)
	srv.DropTable(m.Target)
	if _, err := merge.NewDatabendMerger(s, false).Merge(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if want := modelState(srv); !slices.Equal(got, want) {
		t.Errorf("model %s:\n  %s\nbuilt by one merger:\n  %s\n(watermarks %v)", what,
			strings.Join(got, "\n  "), strings.Join(want, "\n  "), rowsText(srv.Rows("tracelake_merge_watermarks")))
	}
}

// modelState renders model b's target rows and rejects (topic,
// partition, offset) sorted, for comparison.
func modelState(srv *databendtest.Server) []string {
	var out []string
	for _, r := range srv.Rows("b") {
		out = append(out, fmt.Sprintf("row o=%s v=%s x=%s", r["o"], r["v"], r["x"]))
	}
	for _, r := range srv.Rows("b_rejects") {
		out = append(out, fmt.Sprintf("reject %s/%s/%s", r["topic"], r["partition"], r["offset"]))
	}
	slices.Sort(out)
	return out
}

// The same two setups at once, the second one's transaction forgetting
// the watermarks failing (after its tables were made anew, the first
// process's tombstones with them): its next merge, finding the target
// the first one made, must still forget, or the tombstones the first
// merge wrote are gone below watermarks that stay. So must the next
// merge after the second process restarts (killed, or `tracelake merge`
// run again, as its failed reset ended it): what a reset left unfinished
// is kept in Databend, not only in the memory of the process that began
// it. The first process may also merge just after the second one marked
// its reset begun and before its drops, its own reset (begun at once)
// done by then, the second's mark deleted with its own: the second's
// drops then take that merge's tombstones all the same.
func TestModelSetUpWhoseForgettingFailedForgetsAtItsNextMerge(t *testing.T) {
	for _, at := range []string{
		"INSERT INTO tracelake_merge_watermarks",
		"CREATE TABLE IF NOT EXISTS b_tombstones",
	} {
		for _, restarted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restarted=%v", at, restarted), func(t *testing.T) { forgettingFailed(t, at, restarted, false) })
		}
	}
}

// The same failed forgetting, the second process then gone for good
// (`tracelake merge` ended by the failure) and the first one, which set
// the model up before, going on merging alone (`tracelake run`): the
// reset the second left unfinished is marked in Databend, and until it
// is finished the first one's merges must not go on below watermarks
// whose tombstones the second's drop took (a deleted row came back with
// an older change arriving later, for as long as that process ran).
func TestModelResetLeftUnfinishedByAProcessGoneIsFinishedByTheOneStillMerging(t *testing.T) {
	forgettingFailed(t, "INSERT INTO tracelake_merge_watermarks", false, true)
}

// forgettingFailed runs the first process's merge after the second
// one's statement at, then fails the second one's forgetting; the next
// merge is the second one's (restarted: a new merger's), or with
// firstGoesOn the first one's.
func forgettingFailed(t *testing.T, at string, restarted, firstGoesOn bool) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m, raw := raceModel(srv)
	var fired, failing atomic.Bool
	var firstErr error
	first := merge.NewDatabendMerger(s, false)
	srv.Set(func() {
		srv.After = func(sql string) {
			if strings.HasPrefix(strings.ReplaceAll(sql, `"`, ""), at) && fired.CompareAndSwap(false, true) {
				_, firstErr = first.Merge(ctx, m)
				failing.Store(true)
			}
		}
		srv.CommitError = func() int {
			if failing.CompareAndSwap(true, false) {
				return databendtest.CodeSyntaxException // not retried
			}
			return 0
		}
	})
	second := merge.NewDatabendMerger(s, false)
	if _, err := second.Merge(ctx, m); err == nil {
		t.Fatal("the second setup's forgetting did not fail: the interleaving was not made")
	}
	srv.Set(func() { srv.After, srv.CommitError = nil, nil })
	if !fired.Load() || firstErr != nil {
		t.Fatalf("the first process's merge: ran %v, %v", fired.Load(), firstErr)
	}
	raw(`{"o": 1, "v": 4, "op": "c", "x": 4}`) // older than key 1's delete
	next := second
	switch {
	case firstGoesOn:
		next = first
	case restarted:
		next = merge.NewDatabendMerger(s, false)
	}
	if _, err := next.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	wantAsOneMergerBuilds(t, srv, s, m, "after a setup whose forgetting failed")
}

// A reset stopped after its drop of the tombstones and before their
// creation (killed, or the CREATE failing), its mark after that drop
// committed, while another process made the target and merged: the next
// setup finds the target there without tombstones. That is the
// unfinished reset's doing, not a target built without a version, and
// the setup must finish the reset rather than refuse the model (saying
// to drop the target), while the process that made the target, its
// merges failing on the tombstones' absence, goes on once it is done.
func TestModelResetStoppedBetweenItsTombstonesDropAndCreateIsFinishedByTheNextSetup(t *testing.T) {
	for _, restarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("restarted=%v", restarted), func(t *testing.T) { resetStoppedWithoutTombstones(t, restarted) })
	}
}

func resetStoppedWithoutTombstones(t *testing.T, restarted bool) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m, raw := raceModel(srv)
	first := merge.NewDatabendMerger(s, false)
	var fired atomic.Bool
	var firstErr error
	drops, stopped := 0, false
	srv.Set(func() {
		// The first process, finding the target absent too, resets,
		// makes the target and merges once the second one marked its
		// reset begun: its own drop of the tombstones is the first.
		srv.After = func(sql string) {
			if strings.HasPrefix(sql, "INSERT INTO tracelake_merge_watermarks") && fired.CompareAndSwap(false, true) {
				_, firstErr = first.Merge(ctx, m)
			}
		}
		// The second one stops at its creation of the tombstones, after
		// its drop (the second) and the mark following it: every
		// statement from there fails, as a process killed there sends
		// none.
		srv.QueryStatus = func(sql string) int {
			sql = strings.ReplaceAll(sql, `"`, "")
			if strings.HasPrefix(sql, "DROP TABLE IF EXISTS b_tombstones") {
				drops++
			}
			if drops == 2 && strings.HasPrefix(sql, "CREATE TABLE IF NOT EXISTS b_tombstones") {
				stopped = true
			}
			if stopped {
				return http.StatusServiceUnavailable
			}
			return 0
		}
	})
	second := merge.NewDatabendMerger(s, false)
	if _, err := second.Merge(ctx, m); err == nil {
		t.Fatal("the second setup did not stop: the interleaving was not made")
	}
	srv.Set(func() { srv.After, srv.QueryStatus = nil, nil })
	if !fired.Load() || firstErr != nil {
		t.Fatalf("the first process's merge: ran %v, %v", fired.Load(), firstErr)
	}
	if srv.Columns("b_tombstones") != nil {
		t.Fatal("the tombstones are there: the second setup did not stop between their drop and their creation")
	}
	raw(`{"o": 1, "v": 4, "op": "c", "x": 4}`) // older than key 1's delete
	if restarted {
		second = merge.NewDatabendMerger(s, false)
	}
	if _, err := second.Merge(ctx, m); err != nil {
		t.Fatalf("the setup after the stopped reset: %v", err)
	}
	if _, err := first.Merge(ctx, m); err != nil {
		t.Fatalf("the first process's merge after the reset was finished: %v", err)
	}
	wantAsOneMergerBuilds(t, srv, s, m, "after a reset stopped between its tombstones' drop and creation")
}
