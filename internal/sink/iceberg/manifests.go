package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Manifest rewriting. Every load commit adds a manifest; merge on append
// (commit.manifest-merge.enabled, tableProperties) only folds them once
// commit.manifest.min-count-to-merge (100) pile up, and then by size, so a
// day's files end up spread over manifests that also hold other days: a
// scan of one hour reads them all. Rewriting the manifests clusters the
// entries by day partition, one manifest (rolled at the target size) per
// day, so planning a scan of a day opens that day's manifests only. It is
// Iceberg's rewrite_manifests maintenance action (Java's
// RewriteManifestsSparkAction clusters by partition the same way); here it
// is iceberg-go's Transaction.RewriteManifests
// (github.com/apache/iceberg-go table/rewrite_manifests.go, v0.7.0), which
// writes metadata only and commits a "replace" snapshot, so streaming
// readers skip it and it races loads like a compaction does.

// ManifestRewrite reports what rewriting one table's manifests did.
type ManifestRewrite struct {
	Table string
	// Before and After count the manifests of the current snapshot.
	Before, After int
}

// RewriteManifests merges each table's data manifests into one manifest
// per day partition (rolled at commit.manifest.target-size-bytes, 8 MiB by
// default), re-reading the table after each race lost to a load.
func (s *Sink) RewriteManifests(ctx context.Context) ([]ManifestRewrite, error) {
	var out []ManifestRewrite
	for _, id := range s.tableIDs() {
		r := ManifestRewrite{Table: name(id)}
		err := s.retryLostRaces(ctx, id, func(tbl *table.Table) (*table.Transaction, error) {
			ms, err := manifests(ctx, tbl)
			if err != nil {
				return nil, err
			}
			before := len(ms)
			r.Before, r.After = before, before
			if clusteredByDay(ms, dayPosition(tbl.Spec())) {
				return nil, nil // nothing to commit
			}
			txn := tbl.NewTransaction()
			res, err := txn.RewriteManifests(ctx, table.WithRewriteManifestClusterBy(dayOf(dayField(tbl.Spec()))))
			if err != nil {
				return nil, fmt.Errorf("rewrite the manifests: %w", err)
			}
			// A no-op stages nothing: committing txn changes nothing.
			r.Before, r.After = before, before-len(res.RewrittenManifests)+len(res.AddedManifests)
			return txn, nil
		})
		if err != nil {
			return out, fmt.Errorf("rewrite manifests of %s: %w", name(id), err)
		}
		if r.After != r.Before {
			s.log.Info("rewrote manifests", "table", r.Table, "manifests", r.Before, "into", r.After)
		}
		out = append(out, r)
	}
	return out, nil
}

// dayOf is a data file's day partition (field day) as a manifest cluster
// key; files of a table partitioned otherwise all share one key.
func dayOf(day int) func(df iceberggo.DataFile) any {
	return func(df iceberggo.DataFile) any {
		switch v := df.Partition()[day].(type) {
		case iceberggo.Date:
			return strconv.Itoa(int(v))
		case int32:
			return strconv.Itoa(int(v))
		}
		return "none"
	}
}

// manifests are the manifests of tbl's current snapshot.
func manifests(ctx context.Context, tbl *table.Table) ([]iceberggo.ManifestFile, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := snap.Manifests(fsys)
	if err != nil {
		return nil, fmt.Errorf("read the manifest list of %s: %w", name(tbl.Identifier()), err)
	}
	return ms, nil
}

// clusteredByDay says whether the data manifests ms are as a rewrite by
// day leaves them: each of one day (its partition summary's bounds of the
// day field, at position day, equal) and no two of the same day. A
// rewrite with a cluster key writes every manifest again even then
// (iceberg-go v0.7.0 reports no no-op for it), so each maintenance round
// committed a snapshot that changed nothing, racing the loads. A day past
// the target manifest size (two manifests) is rewritten each round.
func clusteredByDay(ms []iceberggo.ManifestFile, day int) bool {
	if day < 0 {
		return false
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if m.ManifestContent() != iceberggo.ManifestContentData {
			continue
		}
		ps := m.Partitions()
		if day >= len(ps) {
			return false
		}
		f := ps[day]
		key := "null"
		switch {
		case f.LowerBound == nil && f.UpperBound == nil: // every entry's day is null
		case f.ContainsNull || f.LowerBound == nil || f.UpperBound == nil || !bytes.Equal(*f.LowerBound, *f.UpperBound):
			return false
		default:
			key = string(*f.LowerBound)
		}
		if seen[key] {
			return false
		}
		seen[key] = true
	}
	return true
}

// dayPosition is the position of spec's day partition field among its
// fields (a manifest's partition summaries are in that order); -1 if it
// has none.
func dayPosition(spec iceberggo.PartitionSpec) int {
	for i, f := range spec.Fields() {
		if _, ok := f.Transform.(iceberggo.DayTransform); ok {
			return i
		}
	}
	return -1
}
