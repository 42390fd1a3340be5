package otlp

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

// A request larger than the topic's max.message.bytes before compression,
// but far under it compressed (the producer compresses with snappy by
// default, and the broker judges the compressed batch), fits the topic: it
// is produced alone and stored. Found by an outside review: with batches
// bounded by the topic's limit, franz-go refused the record, and the
// forwarder answered it 413, which clients do not retry.
func TestForwardCompressibleRequestPastTheLimitIsStored(t *testing.T) {
	const topic, limit = "otlp_spans", 1 << 20
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, limit)
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	f, err := NewKafkaForwarder(t.Context(), opts, map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// 2 MiB of repetitive OTLP-like bytes: snappy makes it a few dozen KB.
	body := bytes.Repeat([]byte("\x0a\x12service.name\x12\x0a\x0acheckout-api\x1a\x10span-attribute-value"), (2<<20)/58)
	if _, err := f.Forward(t.Context(), Traces, "team-a", body); err != nil {
		t.Fatalf("a %d-byte request that compresses far under the topic's %d-byte limit: %v (ErrTooLarge: %v)",
			len(body), limit, err, errors.Is(err, ErrTooLarge))
	}
	cons := kafkatest.Client(t, c, kgo.ConsumeTopics(topic))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got []byte
	for got == nil && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = r.Value })
	}
	if !bytes.Equal(got, body) {
		t.Errorf("stored %d bytes, want the request's %d", len(got), len(body))
	}
}

// When the brokers cannot be asked at start (Kafka still starting, or slow
// past describeTimeout), the forwarder guesses 1 MiB: a request past the
// guess that the topic takes (8 MiB here) is produced alone and stored. It
// was answered 413 for the life of the process (an outside review). (The
// start's question is cut short by a cancelled context.)
func TestForwardLimitGuessedAtStartStoresWhatTheTopicTakes(t *testing.T) {
	const topic = "otlp_spans"
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, 8<<20)
	unanswered, cancel := context.WithCancel(t.Context())
	cancel() // the brokers did not answer at start
	f, err := NewKafkaForwarder(unanswered, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body := make([]byte, 2<<20)
	rng := rand.NewChaCha8([32]byte{1}) // incompressible
	_, _ = rng.Read(body)
	if _, err := f.Forward(t.Context(), Traces, "team-a", body); err != nil {
		t.Fatalf("a 2 MiB request to a topic taking 8 MiB, its broker answering: %v (ErrTooLarge, a 413: %v)", err, errors.Is(err, ErrTooLarge))
	}
}
