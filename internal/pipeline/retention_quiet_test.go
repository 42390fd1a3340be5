package pipeline_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// Retention deleted every record past the ledger while tracelake was
// stopped, and nothing new arrives (a quiet topic): the run must still
// say the records are lost (log and tracelake_lost_records_total) when it
// is given the partition, not only once a later record is fetched; verify
// reports the hole, no duplicate. Before, the run read nothing, counted
// nothing and exited idle ("everything that arrived is loaded").
func TestRetentionOfEverythingUnloadedOnAQuietTopicIsReported(t *testing.T) {
	_, cl, cfg, s := loadedHundred(t)
	produceNumbers(t, cl, 100, 200)
	deleteBelow(t, cl, 200) // the log is empty now, starting at 200

	m, err := runIdleCounting(t, cfg, s)
	must(t, err)
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 100 {
		t.Errorf("lost records metric %v, want 100: records 100-199 were deleted before they were loaded", got)
	}
	wantHole100(t, cfg, s)
}

// A topic deleted and recreated while tracelake was stopped, and nothing
// produced to it since: its log ends below the ledger, so the run must
// stop with the reason as it does once a record of the new log is
// fetched. Before, it read nothing and exited idle, as if everything
// were loaded.
func TestRecreatedTopicStillEmptyStopsTheRun(t *testing.T) {
	_, cl, cfg, s := loadedHundred(t)
	adm := kadm.NewClient(cl)
	_, err := adm.DeleteTopics(context.Background(), topic)
	must(t, err)
	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, topic)
	must(t, err)

	m, err := runIdleCounting(t, cfg, s)
	if err == nil || !strings.Contains(err.Error(), "deleted and recreated") {
		t.Fatalf("run over a recreated, empty topic: %v; want an error saying it was recreated", err)
	}
	if got := testutil.ToFloat64(m.LogResets.WithLabelValues(topic)); got < 1 {
		t.Errorf("log resets metric %v, want at least 1", got)
	}
}

// The same quiet topic run again (a restart, or the partition given to
// another worker): the records were said lost once, and nothing has
// changed since, so the next run must not count them again. Else every
// restart over a partition that has had no load since adds the same hole
// to tracelake_lost_records_total, an alert on its increase firing for a
// loss already told.
func TestRetentionOnAQuietTopicIsCountedOnce(t *testing.T) {
	_, cl, cfg, s := loadedHundred(t)
	produceNumbers(t, cl, 100, 200)
	deleteBelow(t, cl, 200)

	for run, want := range []float64{100, 0, 0} {
		if run == 2 {
			produceNumbers(t, cl, 200, 210) // a load after the hole
		}
		m, err := runIdleCounting(t, cfg, s)
		must(t, err)
		if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != want {
			t.Errorf("run %d: lost records metric %v, want %v: records 100-199 were deleted once, before the first run", run+1, got, want)
		}
	}
	wantHole100(t, cfg, s)
}

// wantHole100 checks that verify reports the hole 100-199 retention left
// in the ledger, and nothing else.
func wantHole100(t *testing.T, cfg *config.Config, s *duckdb.Sink) {
	t.Helper()
	rep := verifyReport(t, cfg, s)
	want := []string{topic + "/0: 100 offsets missing (gap: 100-199)"}
	if rep.OK || !slices.Equal(rep.Problems, want) {
		t.Errorf("verify: ok=%v problems %q, want %q", rep.OK, rep.Problems, want)
	}
}
