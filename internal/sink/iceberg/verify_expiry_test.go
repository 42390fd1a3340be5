package iceberg_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
)

// verify's scan of the raw table (Stored) in the middle of its files when
// another process compacts them and expires the snapshot the scan read:
// with the expiry's window, the replaced files stay while that snapshot
// was current within it, and every offset is counted once; with a window
// of 0 they are deleted under the scan, which fails on the first one it
// opens after, not reporting the rows of the files it could not read as
// missing (or those of the compacted file as stored twice).
func TestStoredAcrossCompactionAndExpiryInAnotherProcess(t *testing.T) {
	for _, window := range []time.Duration{time.Hour, 0} {
		t.Run(window.String(), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s := openSink(t, dir, false)
			if err := s.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			const loads, per = 20, 10
			for i := range int64(loads) {
				load(t, s, batch(0, i*per, i*per+per-1))
			}
			maintainer := openSink(t, dir, false)
			var (
				began      atomic.Bool
				maintained error
			)
			useLocalFS(t, noticeFiles{onOpen: func(path string) {
				if !strings.HasSuffix(path, ".parquet") {
					return
				}
				// The first data file the scan opens: the other files
				// of its snapshot are opened after the maintenance.
				// (The maintenance's own opens come through here too.)
				if began.Swap(true) {
					return
				}
				func() {
					c, err := maintainer.Compact(ctx, 64<<20, everyDay, false)
					if err == nil && (len(c) == 0 || c[0].FilesBefore != loads || c[0].FilesAfter != 1) {
						t.Errorf("compaction %+v, want the %d files in 1", c, loads)
					}
					if err == nil {
						_, err = maintainer.Expire(ctx, window, 1)
					}
					maintained = err
				}()
			}})
			got, err := s.Stored(ctx, false)
			if maintained != nil {
				t.Fatalf("maintenance during the scan: %v", maintained)
			}
			if files, err := s.DataFiles(ctx, false); err != nil || len(files) != 1 {
				t.Fatalf("%d data files (%v) after the maintenance, want the compacted one", len(files), err)
			}
			if window == 0 {
				if err == nil {
					t.Fatalf("the scan whose files an expiry of window 0 deleted under it succeeded: %+v", got[partition0])
				}
				t.Logf("the scan failed as it should: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			after := stored(t, s, false)[0]
			if !slices.Equal(after, seq(0, loads*per-1)) {
				t.Errorf("offsets read after the maintenance %v, want 0-%d once", after, loads*per-1)
			}
			o := got[partition0]
			if o == nil {
				t.Fatalf("the scan across the maintenance found no offset of partition 0: %+v", got)
			}
			union, dups := sink.Coverage(o)
			if !slices.Equal(union, []sink.Run{{First: 0, Last: loads*per - 1}}) || dups != 0 || o.Count() != loads*per {
				t.Errorf("the scan across the maintenance counted %v (%d rows, %d twice), want 0-%d once", union, o.Count(), dups, loads*per-1)
			}
		})
	}
}

var partition0 = sink.TopicPartition{Topic: "traces"}
