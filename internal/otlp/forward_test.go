package otlp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

// bufferedHook closes all once n records are buffered in the producer.
type bufferedHook struct {
	mu  sync.Mutex
	n   int
	all chan struct{}
}

func (h *bufferedHook) OnProduceRecordBuffered(*kgo.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 {
		close(h.all)
	}
}

// holdMetadata holds the first Metadata request asking for topic until
// release is closed: the records produced meanwhile wait for the topic's
// partitions, and are batched together once it is answered.
func holdMetadata(c *kfake.Cluster, topic string, release <-chan struct{}) {
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.MetadataRequest)
		if !slices.ContainsFunc(req.Topics, func(t kmsg.MetadataRequestTopic) bool { return t.Topic != nil && *t.Topic == topic }) {
			return nil, nil, false
		}
		c.SleepControl(func() { <-release })
		c.DropControl()
		return nil, nil, false
	})
}

// createTopic creates topic with one partition and max.message.bytes limit.
func createTopic(t *testing.T, c *kfake.Cluster, topic string, limit int) {
	t.Helper()
	v := strconv.Itoa(limit)
	resp, err := kadm.NewClient(kafkatest.Client(t, c)).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &v}, topic)
	if err = errors.Join(err, resp.Err); err != nil {
		t.Fatal(err)
	}
}

// Concurrent requests were grouped into one record batch bounded by
// max_body_bytes + 64KiB, and the topic refused the batch past its
// max.message.bytes whole: eight requests of 300 KB to a topic of 1 MiB
// were answered 413, which clients do not retry, so they were dropped.
// Batches are bounded by the topic's limit, read from the broker (kfake
// refuses a batch past it as Kafka does): all eight are stored. A request
// alone past the limit (incompressible) is refused as too large, one
// exactly at it is not.
func TestForwardBatchesWithinTheTopicLimit(t *testing.T) {
	const topic, limit, requests = "otlp_spans", 1 << 20, 8
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, limit)
	hook := &bufferedHook{n: requests, all: make(chan struct{})}
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.WithHooks(hook)}
	f, err := NewKafkaForwarder(t.Context(), opts, map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.limits[topic] != limit {
		t.Errorf("limit read %d, want %d", f.limits[topic], limit)
	}
	// Every request is buffered before the first can be sent, so they
	// are batched together as far as the batch bound lets them.
	holdMetadata(c, topic, hook.all)
	// Random bodies: franz-go compresses batches (snappy by default),
	// and the broker measures them compressed.
	rng := rand.NewChaCha8([32]byte{})
	bodies := make([][]byte, requests)
	for i := range bodies {
		bodies[i] = make([]byte, 300_000)
		_, _ = rng.Read(bodies[i])
	}
	errs := make([]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() { _, errs[i] = f.Forward(t.Context(), Traces, fmt.Sprintf("team-%d", i), bodies[i]) })
	}
	wg.Wait()
	forwarded := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d of 300 KB: %v (too large: %v)", i, err, errors.Is(err, ErrTooLarge))
		} else {
			forwarded++
		}
	}
	cons := kafkatest.Client(t, c, kgo.ConsumeTopics(topic))
	stored := map[string][]byte{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for len(stored) < forwarded && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { stored[string(r.Headers[0].Value)] = r.Value })
	}
	for i := range requests {
		if body, ok := stored[fmt.Sprintf("team-%d", i)]; !ok || !bytes.Equal(body, bodies[i]) {
			t.Errorf("request %d: stored %v, with its body %v", i, ok, bytes.Equal(body, bodies[i]))
		}
	}

	// One incompressible message alone: its batch at the broker's limit
	// goes (franz-go counts 4 bytes more than the broker, as
	// loneBatchBytes does), one byte more is refused by the broker, as
	// too large.
	size := limit - 200
	for loneBatchBytes(f.record(Traces, "big", make([]byte, size))) < limit+4 {
		size++
	}
	big := make([]byte, size+1)
	_, _ = rng.Read(big)
	if _, err := f.Forward(t.Context(), Traces, "big", big[:size]); err != nil {
		t.Errorf("a request whose message is %d bytes, at the limit: %v", size, err)
	}
	if _, err := f.Forward(t.Context(), Traces, "big", big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a request whose message is past the limit: %v, want ErrTooLarge", err)
	}
}

// A topic not created yet takes the broker's message.max.bytes; when the
// brokers cannot be asked, Kafka's default is assumed.
func TestForwardLimitFallbacks(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000000"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	createTopic(t, c, "own", 300_000)
	f, err := NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
		map[string]string{Traces: "own", Logs: "later", Metrics: "later"}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.limits["own"] != 300_000 || f.limits["later"] != 2_000_000 {
		t.Errorf("limits %v, want own 300000 (its own), later 2000000 (the broker's)", f.limits)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // nothing answers
	f, err = NewKafkaForwarder(ctx, []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, map[string]string{Traces: "t"}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.limits["t"] != kafkaDefaultMaxMessageBytes {
		t.Errorf("limit without a broker %d, want Kafka's default %d", f.limits["t"], kafkaDefaultMaxMessageBytes)
	}
}

// storedValues counts the values topic holds on c, each time it holds
// them: read up to the topic's end offsets as they are, so a copy written
// after the one looked for is counted too.
func storedValues(t *testing.T, c *kfake.Cluster, topic string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(kafkatest.Client(t, c)).ListEndOffsets(ctx, topic)
	if err = errors.Join(err, ends.Error()); err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	cons := kafkatest.Client(t, c, kgo.ConsumeTopics(topic))
	stored := map[string]int{}
	for read := int64(0); read < total; {
		fetches := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records of %s: %v", read, total, topic, ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			stored[string(r.Value)]++
			read++
		})
	}
	return stored
}

// partitionedValues receives the value of each record the producer has
// queued in its partition's batches.
type partitionedValues chan string

func (p partitionedValues) OnProduceRecordPartitioned(r *kgo.Record, _ int32) { p <- string(r.Value) }

// bufferedValues receives the value of each record the producer buffers.
type bufferedValues chan string

func (b bufferedValues) OnProduceRecordBuffered(r *kgo.Record) { b <- string(r.Value) }

// failedValues is a producer hook that tells the value of each record
// franz-go fails (never blocking the producer).
type failedValues chan string

func (f failedValues) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		select {
		case f <- string(r.Value):
		default:
		}
	}
}

// awaitFailed waits until franz-go has failed a record of value v.
func awaitFailed(t *testing.T, failed failedValues, v string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-failed:
			if got == v {
				return
			}
		case <-timeout:
			t.Fatalf("franz-go did not fail the record %q within 30s", v)
		}
	}
}

// watchedForwarder is a forwarder of traces to topic on c whose producers
// tell the value of each record they buffer; closed as the test ends.
// hooks are the producers' too.
func watchedForwarder(t *testing.T, c *kfake.Cluster, topic string, hooks ...kgo.Hook) (*KafkaForwarder, bufferedValues) {
	t.Helper()
	buffered := make(bufferedValues, 8)
	f, err := NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.WithHooks(append(hooks, buffered)...)},
		map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, buffered
}

// closer is a channel and a function closing it, once however often it
// is called (by the test, and deferred for a test that stops first).
func closer() (chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

// holdFirstProduce holds the first Produce request c gets until release
// is called; held is closed as it arrives.
func holdFirstProduce(c *kfake.Cluster) (held <-chan struct{}, release func()) {
	arrived := make(chan struct{})
	released, release := closer()
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		close(arrived)
		c.SleepControl(func() { <-released })
		c.DropControl()
		return nil, nil, false
	})
	return arrived, release
}

// A request whose client gives up before its message is sent is failed by
// the producer, unwritten (franz-go fails a record on its context's end
// only while it is safe to); but franz-go fails every record buffered for
// the partition with the first one, with its context's error: a request
// whose client was still waiting, buffered behind it, was answered 503
// though the brokers were there to take it. Its message unwritten, it is
// produced again and stored, once; the one whose client gave up is not.
func TestForwardIsNotRefusedForAnotherRequestsEndedContext(t *testing.T) {
	const topic = "otlp_spans"
	c := kafkatest.Cluster(t, 1, topic)
	failed := make(failedValues, 8)
	f, buffered := watchedForwarder(t, c, topic, failed)
	// Both wait for the topic's partitions until the first request's
	// client has given up.
	released, release := closer()
	holdMetadata(c, topic, released)
	defer release()
	gone, giveUp := context.WithCancel(t.Context())
	goneDone, waitingDone := forwardGoneThenWaiting(t, f, buffered, gone)
	giveUp()
	if err := <-goneDone; err == nil {
		t.Error("a request whose client gave up before it was sent was acknowledged")
	}
	// The request returns at its context's end; franz-go fails its record
	// when it next looks at that context. Released before, the record is
	// sent (a copy its client's retry would make too, as produce says):
	// the metadata is held until franz-go has failed it.
	awaitFailed(t, failed, "gone")
	release()
	if err := <-waitingDone; err != nil {
		t.Errorf("a request whose client waits, behind one whose client gave up: %v", err)
	}

	if stored := storedValues(t, c, topic); stored["waiting"] != 1 || stored["gone"] != 0 {
		t.Errorf("stored %v, want the waiting request once and not the one given up before it was sent", stored)
	}
}

// forwardGoneThenWaiting forwards a request "gone" under gone, then,
// once buffered says its record is in the producer, a request "waiting"
// under the test's context, buffered behind it; it returns their
// answers.
func forwardGoneThenWaiting(t *testing.T, f *KafkaForwarder, buffered <-chan string, gone context.Context) (goneDone, waitingDone <-chan error) {
	t.Helper()
	goneErr, waitingErr := make(chan error, 1), make(chan error, 1)
	go func() { _, err := f.Forward(gone, Traces, "team-gone", []byte("gone")); goneErr <- err }()
	if v := <-buffered; v != "gone" {
		t.Fatalf("buffered %q first", v)
	}
	go func() {
		_, err := f.Forward(t.Context(), Traces, "team-waiting", []byte("waiting"))
		waitingErr <- err
	}()
	if v := <-buffered; v != "waiting" {
		t.Fatalf("buffered %q second", v)
	}
	return goneErr, waitingErr
}
