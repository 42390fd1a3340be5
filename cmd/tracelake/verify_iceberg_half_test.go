package main

import (
	"context"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/verify"
)

// An OTLP load-mode instance's load committed its operations (offset 5)
// and then failed to commit its spans; the instance takes no request
// after it (idle, or never restarted), so nothing abandons them: the
// operations of a request its client was told to retry stay, with no
// span, for good. verify said OK, taking them for a load still
// committing its spans. It must say the spans are missing once no
// commit brings them.
func TestIcebergVerifyReportsOperationsWhoseSpansNeverCommit(t *testing.T) {
	ctx := context.Background()
	seq := sink.SequenceTopicPrefix + "traces"
	cfg, ice := loadedGenAIIceberg(t, seq)
	icebergtest.AppendCopy(t, ice.Catalog(), ice.DerivedIdentifier(), iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(4)), map[string]int64{"koffset": 5})
	rep := &verify.Report{OK: true}
	if err := checkIcebergDerived(ctx, cfg, ice, rep); err != nil {
		t.Fatal(err)
	}
	if want := seq + "/0 offsets 5-5"; rep.OK || !strings.Contains(strings.Join(rep.Problems, ";"), want) {
		t.Errorf("operations whose spans never commit: OK=%v %q; want them reported (%s)", rep.OK, rep.Problems, want)
	}
}

// The same with the dead-letter table: a load-mode load committed its
// dead letter (position 5) and failed its main table's commit, on an
// instance that takes no request since. The dead letter of a request
// its client was told to retry stays, past the main table's position,
// where verify counted it as stored and said OK.
func TestIcebergVerifyReportsDeadLettersPastTheMainPositions(t *testing.T) {
	rep := verifyDeadLetterPastMain(t, sink.TopicPartition{Topic: sink.SequenceTopicPrefix + "traces"})
	if rep.OK {
		t.Errorf("a dead letter past the main table's position that no commit of the main table follows: verify OK %q; want it reported", rep.Problems)
	}
}

// The same state on a Kafka partition is a load whose main commit is
// still to come: retried (a lost race, a catalog error, backoff), or
// after a crash made by the partition's next owner, which reads the
// records again from the main table's position (the dead letter fenced
// by the dead-letter table's own). Nothing is lost or doubled, and
// verify failed a healthy pipeline whose main commit took more than 5 s.
func TestIcebergVerifyTakesAKafkaLoadStillCommitting(t *testing.T) {
	rep := verifyDeadLetterPastMain(t, sink.TopicPartition{Topic: "traces"})
	if !rep.OK {
		t.Errorf("a Kafka load that committed its dead letter and not yet its main table: verify failed %q; want OK (its retry or the next owner commits the rest)", rep.Problems)
	}
}

// verifyDeadLetterPastMain verifies the sink deadLetterPastMain leaves.
func verifyDeadLetterPastMain(t *testing.T, tp sink.TopicPartition) *verify.Report {
	t.Helper()
	cfg, _ := deadLetterPastMain(t, tp)
	rep, err := verifyIceberg(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// deadLetterPastMain loads offsets 0-4 of tp (4 a dead letter) into an
// Iceberg sink, then commits a dead letter at 5 and the dead-letter
// table's position past it, as a load would before its main commit.
func deadLetterPastMain(t *testing.T, tp sink.TopicPartition) (*config.Config, *iceberg.Sink) {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Kafka.Brokers = nil
	cfg.Sink.Type = config.SinkIceberg
	ice := preparedIceberg(t, cfg)
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: tp, First: 0, Last: 4, Records: 4, DLQ: 1}}}
	for o := range int64(5) {
		rec := &kgo.Record{Topic: tp.Topic, Offset: o, Value: []byte(`{"o":1}`), Timestamp: time.Now()}
		if o == 4 {
			rec.Value = []byte{0xfe}
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not UTF-8", envelope.StageDecode)
			continue
		}
		b.Records = append(b.Records, sink.Record{Record: rec, ID: [16]byte{byte(o)}})
	}
	f, err := ice.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ice.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	_, dlq := ice.Identifiers()
	icebergtest.AppendCopy(t, ice.Catalog(), dlq, iceberggo.EqualTo(iceberggo.Reference("offset"), int64(4)), map[string]int64{"offset": 5})
	setProperties(t, ice, dlq, iceberggo.Properties{iceberg.PositionKeyPrefix + tp.Topic + ".0": "6"}) // the dead-letter commit's position, as the load's
	return cfg, ice
}
