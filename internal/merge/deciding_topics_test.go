package merge

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// loadTopic loads values at partition p, offsets from first on, of topic
// (another than the loader's): a raw table fed by several topics.
func loadTopic(t *testing.T, l *rawLoader, topic string, p int32, first int64, values ...[]byte) {
	t.Helper()
	ctx := context.Background()
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: topic, Partition: p},
		First: first, Last: first + int64(len(values)) - 1, Records: int64(len(values))}}}
	var id [16]byte
	for i, v := range values {
		l.ids.Next(&id)
		b.Rows = envelope.AppendRawRow(b.Rows, &kgo.Record{Topic: topic, Partition: p, Offset: first + int64(i), Value: v, Timestamp: time.Now()}, &id, envelope.ValueVerbatim)
	}
	f, err := l.s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
}

// A model's raw table fed by two topics (kafka.topics lists both, or
// topic_regex matches both): a key's changes with one version at the
// same partition and offset of each topic tie in (version, partition,
// offset), the order of a merge and of a rebuild, and the deciding
// change keeps no topic. The merges give the row to the change merged
// last, the rebuild to whichever of the two its sort meets first: a
// rebuild, and reconcile, disagree with the merges depending on the
// order the topics were merged in.
func TestVersionTieAcrossTopicsRebuildsAsMerged(t *testing.T) {
	for _, order := range [][2]string{{testTopic, "cdc2"}, {"cdc2", testTopic}} {
		t.Run(order[0]+"_first", func(t *testing.T) {
			l, m, mg := customersLoader(t, true)
			for _, topic := range order {
				loadTopic(t, l, topic, 0, 0, change{id: 1, v: 5, action: "update", name: "from " + topic, balance: "1"}.json())
				mustMerge(t, mg, m)
			}
			rebuiltAsMerged(t, l, mg, m, 0, 1)
		})
	}
}
