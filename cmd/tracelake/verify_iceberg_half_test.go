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
	cfg, ice := loadedGenAIIceberg(t)
	icebergtest.AppendCopy(t, ice.Catalog(), ice.DerivedIdentifier(), iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(4)), map[string]int64{"koffset": 5})
	rep := &verify.Report{OK: true}
	if err := checkIcebergDerived(ctx, cfg, ice, rep); err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(strings.Join(rep.Problems, ";"), "otlp/0 offsets 5-5") {
		t.Errorf("operations whose spans never commit: OK=%v %q; want them reported (otlp/0 offsets 5-5)", rep.OK, rep.Problems)
	}
}

// The same with the dead-letter table: a load-mode load committed its
// dead letter (position 5) and failed its main table's commit, on an
// instance that takes no request since. The dead letter of a request
// its client was told to retry stays, past the main table's position,
// where verify counted it as stored and said OK.
func TestIcebergVerifyReportsDeadLettersPastTheMainPositions(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Kafka.Brokers = nil
	cfg.Sink.Type = config.SinkIceberg
	ice := preparedIceberg(t, cfg)
	tp := sink.TopicPartition{Topic: sink.SequenceTopicPrefix + "traces"}
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
	tbl, err := ice.Catalog().LoadTable(ctx, dlq)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction() // the dead-letter commit's position, as the load's
	if err := txn.SetProperties(iceberggo.Properties{iceberg.PositionKeyPrefix + tp.Topic + ".0": "6"}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := verifyIceberg(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK {
		t.Errorf("a dead letter past the main table's position that no commit of the main table follows: verify OK %q; want it reported", rep.Problems)
	}
}
