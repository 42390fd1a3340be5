package merge

import (
	"context"
	"slices"
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

// A table of deciding changes made before it kept their topics (by the
// release of 2026-12-07) is given the column on the next merge; its
// changes, without a topic, tie with an incoming change of their
// version, partition and offset, which applies (as before), and the
// merges go on recording topics.
func TestDecidingTableWithoutTopicsIsGivenThem(t *testing.T) {
	l, m, mg := customersLoader(t, true)
	loadTopic(t, l, testTopic, 0, 0, change{id: 1, v: 5, action: "update", name: "from cdc", balance: "1"}.json())
	mustMerge(t, mg, m)
	if _, err := l.db().Exec(`ALTER TABLE customers` + DecidingSuffix + ` DROP COLUMN tl_topic`); err != nil {
		t.Fatal(err)
	}
	loadTopic(t, l, "cdc2", 0, 0, change{id: 1, v: 5, action: "update", name: "from cdc2", balance: "1"}.json(),
		change{id: 2, v: 1, action: "update", name: "two", balance: "1"}.json())
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|from cdc2", "2|two"}; !slices.Equal(got, want) {
		t.Errorf("target: %q, want %q (a tie against a change recorded without its topic goes to the incoming one)", got, want)
	}
	if got, want := dump(t, l.db(), `SELECT id, version, tl_partition, tl_offset, tl_topic FROM customers`+DecidingSuffix),
		[]string{"1|5|0|0|cdc2", "2|1|0|1|cdc2"}; !slices.Equal(got, want) {
		t.Errorf("deciding changes: %q, want %q", got, want)
	}
	rebuiltAsMerged(t, l, mg, m, 0, 1)
}
