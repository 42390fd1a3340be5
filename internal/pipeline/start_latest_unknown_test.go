package pipeline_test

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// With start_offset latest, the listing of the partitions' ends when the
// run starts answers UNKNOWN_TOPIC_OR_PARTITION once for partition 1, an
// old partition whose records below 3 retention deleted (a broker that
// no longer hosts it after a reassignment, reached with stale metadata:
// franz-go does not retry it while its metadata is fresh). The partition
// was left out of the ends, taken as created after the run started, and
// read from offset 0: its old records 3 and 4, which latest skips, were
// loaded (a whole old topic, in production), and 0-2 reported lost,
// records that no one ever meant to read (a false alarm). It starts at
// its end, like partition 0: only the record produced after the start
// is loaded, and nothing is reported lost.
func TestLatestStartsAtTheEndOfAPartitionItsListingDidNotKnow(t *testing.T) {
	sc := newStartCase(t, func(cfg *config.Config) { cfg.Kafka.StartOffset = "latest" })
	sc.deleteRecords(t, 3)
	var unknownOnce atomic.Bool
	sc.c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sc.c.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		ends := len(r.Topics) == 1 && r.Topics[0].Topic == topic && len(r.Topics[0].Partitions) == 2
		for _, rp := range r.Topics[0].Partitions {
			ends = ends && rp.Timestamp == -1
		}
		if !ends || !unknownOnce.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = topic
		for _, rp := range r.Topics[0].Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.LeaderEpoch, sp.Offset = rp.Partition, -1, 0, 5
			if rp.Partition == 1 {
				sp.ErrorCode, sp.LeaderEpoch, sp.Offset = kerr.UnknownTopicOrPartition.Code, -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})

	m := obs.New()
	status := obs.NewStatus()
	await, stop := sc.run(t, pipeline.RunOptions{Stats: &pipeline.Stats{}, Metrics: m, Status: status})
	await("both partitions started", func() bool { return startsAt(status, 0, 5) && owns(status, 1) })
	if !unknownOnce.Load() {
		t.Fatal("the ends were listed without the UNKNOWN_TOPIC_OR_PARTITION answer")
	}
	produce(t, sc.cl, &kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{"p": 1, "i": 5}`)})
	await("the record produced after the start loaded", func() bool { return sc.rows(t, 1) >= 1 })
	must(t, stop())
	if n := sc.rows(t, 1); n != 1 {
		t.Errorf("%d rows of partition 1, want 1: the records before the run started are skipped with latest", n)
	}
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 0 {
		t.Errorf("lost records metric %v, want 0: nothing was meant to be read below the end", got)
	}
}
