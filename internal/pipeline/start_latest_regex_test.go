package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With kafka.topic_regex and start_offset latest, a matching topic created
// after the group started (here between two runs: the same as while a run
// ran but before its metadata refresh, then a restart) holds only records
// produced after the group's start, as a partition added to a topic the
// group read does. A topic created while a run runs starts at its
// beginning (TestTopicRegex); one created between two runs was listed at
// its end by the next run, and the 5 records produced to it were skipped,
// acknowledged to their producer and never loaded, verify silent (the gap
// is before the partition's first ledger range).
func TestTopicRegexTopicCreatedBetweenRunsStartsAtItsBeginning(t *testing.T) {
	c := newCluster(t, 1) // llm-traces
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 10) // before the group's start: skipped
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = nil
	cfg.Kafka.TopicRegex = "^llm-"
	cfg.Kafka.StartOffset = "latest"
	cfg.Workers = 1
	cfg.Kafka.MetadataRefresh = 1e9 // 1s
	must(t, cfg.Validate())
	s := openSink(t, cfg)

	status, stop := runWithStatus(t, cfg, s)
	await(t, "llm-traces/0 starts at its end", func() bool { return startsAt(status, 0, 10) })
	produceNumbers(t, cl, 10, 11)
	await(t, "llm-traces/0 loaded to 11", func() bool { return startsAt(status, 0, 11) })
	stop()

	_, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, -1, nil, "llm-other")
	must(t, err)
	for i := range 5 {
		produce(t, cl, &kgo.Record{Topic: "llm-other", Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE record_metadata->>'topic' = 'llm-other'`); n != 5 {
		t.Errorf("%d rows of llm-other, created after the group started, want its 5 records", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE record_metadata->>'topic' = 'llm-traces'`); n != 1 {
		t.Errorf("%d rows of llm-traces, want the 1 record produced after the start", n)
	}
	verifyOK(t, cfg, s)
}
