package databend_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
)

// A former owner's load of partition 0 stands still at a step of its
// transaction while the new owner commits enough loads of the partition
// for a prune of the fence table (claim.go, pruneClaims) to delete the
// rows the former's claims read counted: the former's claim must still
// collide with the new owner's first, and every offset be stored once.
func TestPruneBesideAFormerOwnersLoad(t *testing.T) {
	for _, c := range []struct {
		name string
		at   func(sql string) bool
	}{
		{"after its claims read", func(sql string) bool {
			return strings.HasPrefix(sql, `SELECT topic, "partition", count(*), max(claim)`)
		}},
		{"after its ledger read", func(sql string) bool {
			return strings.HasPrefix(sql, `SELECT topic, "partition", max(last_offset)`)
		}},
		{"after its claim's COPY", func(sql string) bool {
			return strings.HasPrefix(sql, `COPY INTO "trace_raw_fence"`)
		}},
		{"after its rows' COPY", func(sql string) bool {
			return strings.HasPrefix(sql, `COPY INTO "trace_raw" `)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, owner := prepared(t, "")
			ctx := context.Background()
			// Claims 0 and 1 committed before: the former's load reads
			// next 2, as the owner's first load does.
			for i := range int64(2) {
				if err := loadRetrying(ctx, owner, stage(t, owner, batch(0, 10*i, 10*i+9))); err != nil {
					t.Fatal(err)
				}
			}
			former := open(t, srv, "")
			formerFiles := stage(t, former, batch(0, 20, 39))
			loads := int64(2 * databend.PruneEvery)
			moved := false
			srv.After = func(sql string) {
				if moved || !c.at(sql) {
					return
				}
				moved = true // before the owner's loads, whose statements come here too
				for i := int64(2); i < loads; i++ {
					if err := loadRetrying(ctx, owner, stage(t, owner, batch(0, 10*i, 10*i+9))); err != nil {
						t.Error(err)
					}
				}
			}
			if err := loadRetrying(ctx, former, formerFiles); err != nil {
				t.Fatal(err)
			}
			if !moved {
				t.Fatal("the owner never loaded during the former owner's load")
			}
			if n := len(srv.Rows("trace_raw_fence")); n > databend.PruneEvery+2 {
				t.Errorf("the fence table holds %d rows; want them pruned", n)
			}
			if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 10*loads-1)) {
				t.Errorf("offsets %v; want 0..%d once", o, 10*loads-1)
			}
		})
	}
}

// Processes that each commit fewer than PruneEvery loads (tracelake run
// --exit-when-idle from a scheduler, restarts, load-mode receivers
// scaled in and out) never pruned the fence table: its count of loads
// since the last prune starts at zero with each process, and the table
// grew by a row per load and partition for ever, every load's claims
// read counting them all.
func TestFenceKeepsAFewClaimsAcrossShortLivedProcesses(t *testing.T) {
	srv, _ := prepared(t, "")
	ctx := context.Background()
	const processes, loadsEach = 12, 3
	next := int64(0)
	for range processes {
		s := open(t, srv, "")
		for range loadsEach {
			if err := loadRetrying(ctx, s, stage(t, s, batch(0, next, next+9))); err != nil {
				t.Fatal(err)
			}
			next += 10
		}
	}
	if n := len(srv.Rows("trace_raw_fence")); n > databend.PruneEvery+2 {
		t.Errorf("the fence table holds %d rows after %d processes of %d loads; want at most %d", n, processes, loadsEach, databend.PruneEvery+2)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, next-1)) {
		t.Errorf("offsets %v; want 0..%d once", o, next-1)
	}
}
