package pipeline_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// With start_offset earliest, verify proves a partition loaded from its
// log start: a ledger that begins past it is a gap ("never loaded from
// the start"). A partition with nothing loaded at all was judged by the
// group's committed offset alone (AddStarts): its records below that
// offset were neither a gap nor lag, and verify said OK although the
// table will never hold them (the run resumes at the committed offset).
// Here a new table is loaded in the group of an old one: partition 0,
// which gets new records, shows its first 10 offsets missing; partition
// 1, quiet since, showed nothing wrong for the same 10 records. Both are
// the same loss (so is a partition another table's loader took in a
// group shared by mistake, or one whose offsets were reset forward).
func TestVerifyReportsTheUnloadedHeadOfAPartitionWithNothingLoaded(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(p int32, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"p": %d, "i": %d}`, p, i)})
		}
	}
	produceTo(0, 0, 10)
	produceTo(1, 0, 10)

	// The old table: both partitions loaded, the group committed at 10.
	old := testConfig(t, c)
	runUntilIdle(t, old, openSink(t, old), nil)

	// A new table (a new DuckDB file) in the same group: it resumes at the
	// group's committed offsets, and only partition 0 gets records since.
	cfg := testConfig(t, c)
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "new.duckdb")
	s := openSink(t, cfg)
	produceTo(0, 10, 15)
	runUntilIdle(t, cfg, s, nil)

	// As tracelake verify does: the group's offsets (read before the
	// ledger), the report, then the committed starts of the partitions
	// nothing is loaded of.
	admin, err := kafka.NewAdmin(cfg.Kafka)
	must(t, err)
	defer admin.Close()
	committed, err := admin.Committed(context.Background(), cfg.Kafka.Group)
	must(t, err)
	rep := verifyReport(t, cfg, s)
	rep.AddStarts(func() map[sink.TopicPartition]int64 { return committed })
	want := []string{
		topic + "/0: 10 offsets missing (gap: 0-9)",
		topic + "/1: 10 offsets missing (gap: 0-9)",
	}
	if rep.OK || !slices.Equal(rep.Problems, want) {
		t.Errorf("verify: ok=%v problems %q, want %q", rep.OK, rep.Problems, want)
	}
	for _, p := range rep.Partitions {
		if p.Lag != 0 {
			t.Errorf("partition %d: lag %d, want 0 (everything past the committed offset is loaded)", p.Partition, p.Lag)
		}
	}
}
