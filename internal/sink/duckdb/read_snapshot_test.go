//go:build duckdb_arrow

package duckdb

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// A read in the loading process (the read path given the sink's loads to
// give way to) must not hold its DuckDB transaction while its client
// reads: once a commit that updates rows, drops a table or alters one
// lands beside an open transaction (a merge's MERGE … UPDATE of its
// watermark and its DROP TABLE on a reset, Distribute's MERGE into the
// reached table, AddColumns and alterTypes), DuckDB checkpoints nothing
// until it ends, and every later load of the default size goes to the
// write-ahead log (written twice, held in memory) instead of checkpointing
// in its commit (TestFullLoadsCheckpointInTheirCommit), for as long as a
// client keeps its stream open. A streaming result holds its transaction
// until released; so the read path materializes its results there
// (query.runQuery): this test failed with them streaming.
func TestLoadsCheckpointBesideAStreamingReadAfterAnUpdate(t *testing.T) {
	for _, c := range []struct{ what, stmt string }{
		{"merge watermark update", `UPDATE marks SET next_offset = 2 WHERE model = 'm'`},
		{"merge reset drop", `DROP TABLE marks`},
		{"add column", `ALTER TABLE marks ADD COLUMN x INTEGER`},
	} {
		for _, reading := range []bool{false, true} {
			name := c.what + map[bool]string{false: "/no_read", true: "/read_open"}[reading]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				s := prepared(t, false)
				mustLoad(t, s, batch(0, 20_009))
				// A table a merge keeps (as internal/merge's watermarks).
				if _, err := s.DB().Exec(`CREATE TABLE marks (model VARCHAR, next_offset BIGINT);
					INSERT INTO marks VALUES ('m', 1); CHECKPOINT`); err != nil {
					t.Fatal(err)
				}
				if reading {
					r, err := query.NewDuckDB(ctx, s.DB(), query.DuckDBOptions{Loads: s.Loading()})
					if err != nil {
						t.Fatal(err)
					}
					rr, err := r.Query(ctx, tenancy.Operator, "SELECT * FROM trace_raw")
					if err != nil {
						t.Fatal(err)
					}
					defer rr.Release()
					if !rr.Next() {
						t.Fatal(rr.Err())
					}
				}
				if _, err := s.DB().Exec(c.stmt); err != nil {
					t.Fatal(err)
				}
				mustLoad(t, s, batch(20_010, 40_019))
				mustLoad(t, s, batch(40_020, 60_029))
				if n := walBytes(t, s); n != 0 {
					t.Errorf("after two loads of 20,000 rows the write-ahead log holds %d bytes, want none (checkpointed in their commits)", n)
				}
			})
		}
	}
}
