package iceberg

import (
	"context"

	iceberggo "github.com/apache/iceberg-go"
)

// ManifestDays returns, for each data manifest of the main table's
// current snapshot, how many distinct day partitions (the spec's day
// field, found by its transform) its live entries hold.
func (s *Sink) ManifestDays(ctx context.Context) ([]int, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	day := dayField(tbl.Spec())
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, m := range ms {
		if m.ManifestContent() != iceberggo.ManifestContentData {
			continue
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return nil, err
		}
		days := map[any]bool{}
		for _, e := range entries {
			days[e.DataFile().Partition()[day]] = true
		}
		out = append(out, len(days))
	}
	return out, nil
}
