package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/verify"
)

// An administrator's SET GLOBAL max_result_rows (a setting of scope Both,
// settings/src/settings_default.rs; a protection against large results)
// makes databend-query add LIMIT max_result_rows to every query without
// a LIMIT (Planner::add_max_rows_limit, sql/src/planner/planner.rs). The
// ledger read (SELECT topic, "partition", max(last_offset) … GROUP BY) has
// no LIMIT, so with more partitions than max_result_rows it silently
// misses some: their files look unloaded and are copied again.
func TestLedgerReadIsWholeUnderMaxResultRows(t *testing.T) {
	srv, former := prepared(t, "")
	ctx := context.Background()
	// A former owner loaded offsets 0..9 of partitions 0 and 1.
	if _, err := former.Load(ctx, stage(t, former, batch(0, 0, 9), batch(1, 0, 9))); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"max_result_rows": "1"} })
	// The new owner read both partitions again (its positions read is
	// cut the same way) and loads them.
	s := open(t, srv, "")
	next, err := s.Positions(ctx, []sink.TopicPartition{{Topic: "traces", Partition: 0}, {Topic: "traces", Partition: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 2 {
		t.Errorf("positions %v; want 10 for both partitions", next)
	}
	// Another process's staging: its own names (the pipeline's batch id).
	b0, b1 := batch(0, 0, 9), batch(1, 0, 9)
	b0.ID, b1.ID = "p2-1", "p2-2"
	loaded, err := s.Load(ctx, stage(t, s, b0, b1))
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 0 {
		t.Errorf("loaded %+v; want nothing (the ledger has both files)", loaded.Ranges)
	}
	for p := range 2 {
		if o := offsets(t, srv, p); !slices.Equal(o, seq(0, 9)) {
			t.Errorf("partition %d holds offsets %v; want 0..9 once", p, o)
		}
	}
}

// A span Databend rejects goes to the dead-letter table, but the GenAI
// operation derived from it (same coordinates, kindex 1) still loads:
// genai_operations then holds a row whose span is missing, which verify
// counts as an orphan (README "genai_operations": "verify checks … a row
// whose span is missing"; internal/verify DerivedCheckSQL). The load
// itself makes the inconsistency it is checked for.
func TestRejectedSpanTakesItsOperationOut(t *testing.T) {
	srv, s := prepared(t, "", withOps)
	srv.Set(func() {
		srv.Reject = func(table string, r databendtest.Row) string {
			if table == "spans" && string(r["koffset"]) == "3" && string(r["kindex"]) == "1" {
				return "bad string"
			}
			return ""
		}
	})
	if _, err := s.Load(context.Background(), stage(t, s, sinktest.DerivedBatch(0, 4, 0))); err != nil {
		t.Fatal(err)
	}
	spans := map[string]bool{}
	for _, r := range srv.Rows("spans") {
		spans[string(r["koffset"])+"/"+string(r["kindex"])] = true
	}
	for _, r := range srv.Rows("ops") {
		if k := string(r["koffset"]) + "/" + string(r["kindex"]); !spans[k] {
			t.Errorf("operation %s loaded, its span (%s) is not in the spans table (dead-lettered)", r["name"], k)
		}
	}
	rows, err := s.QueryText(context.Background(), verify.DerivedCheckSQL(`"ops"`, `"spans"`, []string{}))
	if err == nil && len(rows) == 1 && rows[0][2] != "0" {
		t.Errorf("verify's derived check finds %s orphans after a load", rows[0][2])
	}
}

// verify reads the whole ledger (one row per load) with a SELECT without
// LIMIT; under SET GLOBAL max_result_rows (Planner::add_max_rows_limit,
// sql/src/planner/planner.rs) it reads only the first rows and reports a
// whole table as not matching its ledger.
func TestVerifyLedgerReadIsWholeUnderMaxResultRows(t *testing.T) {
	srv, s := prepared(t, "")
	ctx := context.Background()
	for _, b := range []*sink.Batch{batch(0, 0, 9), batch(0, 10, 19), batch(0, 20, 29)} {
		if _, err := s.Load(ctx, stage(t, s, b)); err != nil {
			t.Fatal(err)
		}
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"max_result_rows": "1"} })
	main, dlq, ledger := s.Tables()
	rep, err := verify.Run(ctx, s, verify.Tables{Main: main, DLQ: dlq, Ledger: ledger, Raw: true, Topic: s.MainTopicExpr()}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Partitions) != 1 || rep.Partitions[0].LedgerRecords != 30 {
		t.Errorf("verify: ok %v, problems %v, partitions %+v; want ok with 30 records in the ledger", rep.OK, rep.Problems, rep.Partitions)
	}
}

// loadAfterLedgerRead is the sink as verify reads it while `tracelake
// run` loads: a load commits right after verify's first read of the
// ledger, before it counts the tables.
type loadAfterLedgerRead struct {
	*databend.Sink
	ledger string
	load   func()
}

func (q *loadAfterLedgerRead) QueryText(ctx context.Context, sql string) ([][]string, error) {
	rows, err := q.Sink.QueryText(ctx, sql)
	if q.load != nil && strings.Contains(sql, "first_offset") && strings.Contains(sql, q.ledger) {
		load := q.load
		q.load = nil
		load()
	}
	return rows, err
}

// Each of verify's queries is a statement of its own, and Databend reads
// the latest committed version of a table in each (session_catalog.rs
// get_table: only a table the transaction itself changed is read from the
// transaction's buffer, so not even BEGIN gives one snapshot). A load
// committing between the ledger read and the table counts (verify while
// run loads) made verify report a healthy table's partition as not
// matching its ledger.
func TestVerifyWhileALoadCommits(t *testing.T) {
	_, s := prepared(t, "")
	ctx := context.Background()
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 9))); err != nil {
		t.Fatal(err)
	}
	main, dlq, ledger := s.Tables()
	q := &loadAfterLedgerRead{Sink: s, ledger: ledger, load: func() {
		if _, err := s.Load(ctx, stage(t, s, batch(0, 10, 19))); err != nil {
			t.Error(err)
		}
	}}
	rep, err := verify.Run(ctx, q, verify.Tables{Main: main, DLQ: dlq, Ledger: ledger, Raw: true, Topic: s.MainTopicExpr()}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if q.load != nil {
		t.Fatal("no load committed during verify")
	}
	if !rep.OK || len(rep.Partitions) != 1 || rep.Partitions[0].LedgerRecords != rep.Partitions[0].Rows {
		t.Errorf("verify while a load commits: ok %v, problems %v, partitions %+v", rep.OK, rep.Problems, rep.Partitions)
	}
}

// An administrator's SET GLOBAL http_json_result_mode = 'driver' (scope
// Both, settings/src/settings_default.rs; databendlabs/databend#19639)
// makes databend-query write every TIMESTAMP in a reply as its
// microseconds since the epoch (formats field_encoder/string.rs
// timestamp_text), not as the text QueryRows promises: the GenAI rebuild
// and the report, which cast that text to a TIMESTAMP, failed on every
// span read.
func TestReadsTimesAsTextUnderDriverResultMode(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("otel_spans", []string{"span_id", "start_time"}, []string{"VARCHAR", "TIMESTAMP"})
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC)
	srv.AppendRow("otel_spans", databendtest.Row{"span_id": json.RawMessage(`"s1"`), "start_time": json.RawMessage(fmt.Sprint(at.UnixMicro()))})
	srv.Set(func() { srv.GlobalSettings = map[string]string{"http_json_result_mode": "driver"} })
	s := open(t, srv, "", func(o *databend.Options) { o.Table = "otel_spans" })
	rows, err := s.QueryText(context.Background(), "SELECT span_id, start_time FROM otel_spans")
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"s1", "2024-05-01 12:00:00.123456"}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("read %q; want %q", rows, want)
	}
}

// An administrator's SET GLOBAL sql_dialect = 'MySQL' (scope Both,
// settings/src/settings_default.rs) makes databend-query read a double
// quote as a string (ast/src/parser/input.rs Dialect::is_string_quote):
// every statement of the sink, which names its tables and columns in
// double quotes, was a syntax error, and nothing could be loaded.
func TestLoadsUnderAServerSQLDialect(t *testing.T) {
	for _, dialect := range []string{"MySQL", "Hive"} {
		t.Run(dialect, func(t *testing.T) {
			srv := databendtest.New("tl", "s3cret")
			t.Cleanup(srv.Close)
			srv.Set(func() { srv.GlobalSettings = map[string]string{"sql_dialect": dialect} })
			s := open(t, srv, "")
			ctx := context.Background()
			if err := s.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 9))); err != nil {
				t.Fatal(err)
			}
			if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9)) {
				t.Errorf("offsets %v; want 0..9", o)
			}
		})
	}
}
