package otlp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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

// A topic that takes less than the limit the forwarder guessed at start
// (1 MiB: the brokers did not answer then; 600 KB here): two requests of
// 400 KB batched together are refused whole by the broker, and each is
// produced again alone, where it fits: both are stored. A request of
// 700 KB, refused alone too, is too large (413, not retried). The retry
// alone reused the record of the refused produce, whose Context franz-go
// had set to that produce's context, ended as it returned: the lone
// produce failed at once with "context canceled", so every such request
// was answered 503 at every retry, neither stored nor refused for good.
func TestForwardRefusedBatchRetriedAloneIsStored(t *testing.T) {
	const topic, limit = "otlp_spans", 600_000
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, limit)
	hook := &bufferedHook{n: 2, all: make(chan struct{})}
	unanswered, cancelStart := context.WithCancel(t.Context())
	cancelStart() // the brokers did not answer at start: 1 MiB is assumed
	f, err := NewKafkaForwarder(unanswered, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.WithHooks(hook)},
		map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	incompressible := func(seed byte, n int) []byte {
		b := make([]byte, n)
		_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
		return b
	}
	// Both are buffered before the topic's partitions are known, so they
	// go in one batch of 800 KB.
	holdMetadata(c, topic, hook.all)
	bodies := [][]byte{incompressible(1, 400_000), incompressible(2, 400_000)}
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() { _, errs[i] = f.Forward(t.Context(), Traces, fmt.Sprintf("team-%d", i), body) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d of 400 KB to a topic of %d bytes, its batch refused: %v", i, limit, err)
		}
	}
	if _, err := f.Forward(t.Context(), Traces, "big", incompressible(3, 700_000)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a request of 700 KB to a topic of %d bytes: %v, want ErrTooLarge", limit, err)
	}

	stored := storedValues(t, c, topic)
	for i, body := range bodies {
		if stored[string(body)] != 1 {
			t.Errorf("request %d stored %d times, want once", i, stored[string(body)])
		}
	}
}
