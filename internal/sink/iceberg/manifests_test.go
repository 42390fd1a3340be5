package iceberg_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
)

// TestMaintenanceBoundsManifestsAndMetadata commits loads of three days'
// events in rounds, each followed by the maintenance (rewrite manifests,
// expire): the current snapshot keeps one manifest per day partition, the
// manifest files on disk and the metadata file stop growing. Without the
// rewrite each load adds a manifest mixing the three days (merge on
// append waits for 100 of them).
func TestMaintenanceBoundsManifestsAndMetadata(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "warehouse", "tracelake.db", "trace_raw", "metadata")
	const days, rounds, loadsPerRound = 3, 4, 10
	for r := range rounds {
		for l := range loadsPerRound {
			first := int64((r*loadsPerRound + l) * days)
			load(t, s, spreadOverDays(batch(0, first, first+days-1), days))
		}
		rw, err := s.RewriteManifests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rw[0].After > days || rw[0].After >= rw[0].Before {
			t.Errorf("round %d: rewrote %d manifests into %d, want at most %d (one per day)", r, rw[0].Before, rw[0].After, days)
		}
		if _, err := s.Expire(ctx, 0, 1); err != nil {
			t.Fatal(err)
		}
		spans, err := s.RawManifests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) > days {
			t.Errorf("round %d: %d manifests in the current snapshot, want at most %d", r, len(spans), days)
		}
		for i, multi := range spans {
			if multi {
				t.Errorf("round %d: manifest %d holds files of more than one day", r, i)
			}
		}
		manifests, meta := metadataFiles(t, root)
		// The current snapshot's manifests and list, plus what the last
		// commits' metadata files still reference until they expire.
		if manifests > 2*days+2 {
			t.Errorf("round %d: %d manifest files on disk, want them bounded by %d", r, manifests, 2*days+2)
		}
		// Expiry keeps the newest snapshot (and the rewrite's parent until
		// the next expiry); the metadata log is cut at
		// write.metadata.previous-versions-max (100 entries, ~13 KiB).
		if len(meta.Snapshots) > 2 || len(meta.MetadataLog) > 100 || meta.bytes > 32<<10 {
			t.Errorf("round %d: newest metadata.json %d bytes, %d snapshots, %d metadata log entries: want at most 32 KiB, 2, 100",
				r, meta.bytes, len(meta.Snapshots), len(meta.MetadataLog))
		}
	}
	got := stored(t, s, false)
	if n := len(got[0]); n != rounds*loadsPerRound*days {
		t.Errorf("%d rows after the maintenance, want %d", n, rounds*loadsPerRound*days)
	}
}

// spreadOverDays gives the records of b event times on consecutive days
// (the raw table is partitioned by the event's day, the Kafka timestamp
// without one in the value).
func spreadOverDays(b *sink.Batch, days int) *sink.Batch {
	base := time.Now().UTC().Truncate(24 * time.Hour).Add(-time.Duration(days) * 24 * time.Hour)
	for i := range b.Records {
		b.Records[i].Record.Timestamp = base.Add(time.Duration(i%days)*24*time.Hour + time.Hour)
	}
	return b
}

// metadataFiles counts the manifest files (not manifest lists) under a
// table's metadata directory and returns the size of the newest
// metadata.json.
func metadataFiles(t *testing.T, dir string) (manifests int, newestMeta tableMetadata) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var newest time.Time
	var newestPath string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		switch n := e.Name(); {
		case strings.HasSuffix(n, ".avro") && !strings.HasPrefix(n, "snap-"):
			manifests++
		case strings.HasSuffix(n, ".metadata.json") && !info.ModTime().Before(newest):
			newest = info.ModTime()
			newestPath = filepath.Join(dir, n)
		}
	}
	data, err := os.ReadFile(newestPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &newestMeta); err != nil {
		t.Fatal(err)
	}
	newestMeta.bytes = len(data)
	return manifests, newestMeta
}

// tableMetadata is what grows in a metadata.json as commits go by.
type tableMetadata struct {
	bytes       int
	Snapshots   []json.RawMessage `json:"snapshots"`
	MetadataLog []json.RawMessage `json:"metadata-log"`
}
