package iceberg_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// leaseFiles lists the staging leases under root on disk.
func leaseFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == "tracelake-staging" {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A running process's staged files wait for their commit past the grace
// period (a catalog outage): `tracelake orphans` deleted them, as it took
// every unreferenced file older than the grace for a crashed writer's.
// The process's lease now keeps them, the load commits them, and the
// table scans with every row. A lease its process stopped renewing (it
// died) keeps nothing and is deleted.
func TestLeaseKeepsStagedFilesFromOrphans(t *testing.T) {
	type warehouse struct {
		name string
		open func(t *testing.T) (s *iceberg.Sink, root string)
	}
	for _, w := range []warehouse{
		{"local", func(t *testing.T) (*iceberg.Sink, string) {
			dir := t.TempDir()
			return openSink(t, dir, false), filepath.Join(dir, "warehouse")
		}},
		{"s3", func(t *testing.T) (*iceberg.Sink, string) {
			s3 := icebergtest.StartS3(t, "lake")
			return openS3Sink(t, s3), filepath.Join(s3.Root, "lake", "warehouse")
		}},
	} {
		// leased stages a batch whose files are older than the grace
		// period and writes the leases.
		leased := func(t *testing.T) (s *iceberg.Sink, root string, f sink.File, leases []string) {
			s, root = w.open(t)
			f, files := stageOld(t, s, root)
			if err := s.RenewLeases(context.Background()); err != nil {
				t.Fatal(err)
			}
			if leases = leaseFiles(t, root); len(leases) != 2 {
				t.Fatalf("leases %v, want one per table with staged files (raw, dead letters)", leases)
			}
			backdate(t, older, files...)
			return s, root, f, leases
		}
		t.Run(w.name+"/live", func(t *testing.T) {
			ctx := context.Background()
			s, root, f, _ := leased(t)
			res, err := s.RemoveOrphans(ctx, week, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range res {
				if o.Deleted != 0 || len(o.Files) != 0 {
					t.Errorf("%s: orphans %v deleted %d; want the staged files kept", o.Table, o.Files, o.Deleted)
				}
			}
			if len(res[0].Staged) != 1 || len(res[1].Staged) != 1 {
				t.Errorf("reported as staged: %+v, want the raw and the dead-letter file", res)
			}
			if _, err := s.Load(ctx, []sink.File{f}); err != nil {
				t.Fatalf("load after orphan cleanup: %v", err)
			}
			if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 19, 14)) {
				t.Errorf("raw offsets %v", got)
			}
			if got := stored(t, s, true); !slices.Equal(got[0], []int64{14}) {
				t.Errorf("dead-letter offsets %v", got)
			}
			// Nothing staged: the next renewal removes the leases.
			if err := s.RenewLeases(ctx); err != nil {
				t.Fatal(err)
			}
			if leases := leaseFiles(t, root); len(leases) != 0 {
				t.Errorf("leases left with nothing staged: %v", leases)
			}
			// Close removes them too.
			if _, err := s.Stage(ctx, batch(0, 20, 29)); err != nil {
				t.Fatal(err)
			}
			if err := s.RenewLeases(ctx); err != nil {
				t.Fatal(err)
			}
			if len(leaseFiles(t, root)) == 0 {
				t.Fatal("no lease for a staged batch")
			}
			s.Close()
			if leases := leaseFiles(t, root); len(leases) != 0 {
				t.Errorf("leases left after Close: %v", leases)
			}
		})
		t.Run(w.name+"/stale", func(t *testing.T) {
			ctx := context.Background()
			s, root, f, leases := leased(t)
			backdate(t, iceberg.LeaseStaleAfter+time.Minute, leases...)
			res, err := s.RemoveOrphans(ctx, week, false)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Deleted+res[1].Deleted != 2 || len(res[0].Staged)+len(res[1].Staged) != 0 {
				t.Errorf("orphan cleanup %+v: want the two staged files deleted, a stale lease keeping nothing", res)
			}
			if left := leaseFiles(t, root); len(left) != 0 {
				t.Errorf("stale leases not deleted: %v", left)
			}
			s.AgeStaged(2 * time.Hour)
			failsFatally(t, s, f, root)
		})
	}
}
