package otlp

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

// An OTLP/JSON request under otlp.max_body_bytes is re-encoded as protobuf
// before it is forwarded, and protobuf can be several times larger (a
// fixed64 bucket count or a double bound is 8 bytes, "0," in JSON is 2).
// Past the topic's limit uncompressed, it goes to the lone producer, and is
// stored: the broker takes it (zeros compress to a few percent under
// snappy). With the lone producer's batches bounded by
// max_body_bytes+64KiB, franz-go refused the record itself (nothing sent)
// and the forwarder answered 413 (found by an outside review).
func TestForwardJSONGrownPastBodyLimitIsNotRefusedByTheClient(t *testing.T) {
	const topic, limit, maxBody = "otlp_metrics", 1 << 20, 1 << 20
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, limit)
	f, err := NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, map[string]string{Metrics: topic}, "tenant", maxBody, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	const n = 240_000
	zeros := strings.TrimSuffix(strings.Repeat("0,", n), ",")
	js := `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"latency","histogram":{"aggregationTemporality":2,"dataPoints":[{"count":"0","bucketCounts":[` +
		zeros + `,0],"explicitBounds":[` + zeros + `]}]}}]}]}]}`
	if len(js) > maxBody {
		t.Fatalf("the JSON request is %d bytes, past max_body_bytes %d", len(js), maxBody)
	}
	var sig signal
	for _, s := range signals {
		if s.name == Metrics {
			sig = s
		}
	}
	body, items, _, err := sig.decode([]byte(js), true)
	if err != nil || items != 1 {
		t.Fatalf("decode: %d items, %v", items, err)
	}
	t.Logf("JSON %d bytes (max_body_bytes %d) -> protobuf %d bytes", len(js), maxBody, len(body))
	if _, err := f.Forward(t.Context(), Metrics, "team-a", body); err != nil {
		t.Fatalf("a request the receivers took (JSON %d bytes), %d bytes of zeros as protobuf, to a topic of %d bytes: %v (ErrTooLarge, a 413: %v)",
			len(js), len(body), limit, err, errors.Is(err, ErrTooLarge))
	}
}

// The control: the broker takes that very message alone (a producer whose
// batch bound does not refuse it first).
func TestForwardJSONGrownControlBrokerTakesIt(t *testing.T) {
	const topic, limit = "otlp_metrics", 1 << 20
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, limit)
	body := make([]byte, 3840056) // zeros, as the protobuf above mostly is
	cl := kafkatest.Client(t, c, kgo.ProducerBatchMaxBytes(16<<20))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: body}).FirstErr(); err != nil {
		t.Fatalf("the broker refuses %d bytes of zeros alone: %v", len(body), err)
	}
}

// A request waiting for its turn at the lone producer honours its context:
// while another lone request's produce is unanswered (a slow or dead
// broker: up to RecordDeliveryTimeout, 30s, each, and they queue), it
// stayed blocked on a mutex once its context was done, holding its
// handler, its max_inflight_bytes and a max_concurrent_requests slot
// (found by an outside review).
func TestForwardWaitingForTheLoneProducerHonoursItsContext(t *testing.T) {
	// The limit guessed at start (1 MiB; the brokers did not answer), the
	// topic taking 8 MiB: 2 MiB requests go to the lone producer and fit.
	const topic = "otlp_spans"
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, 8<<20)
	unanswered, cancelStart := context.WithCancel(t.Context())
	cancelStart()
	f, err := NewKafkaForwarder(unanswered, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	held, release := holdFirstProduce(c)
	defer release()

	big := func(seed byte) []byte { // incompressible, past the guessed limit: produced alone
		b := make([]byte, 2<<20)
		_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
		return b
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := f.Forward(context.Background(), Traces, "team-a", big(1))
		aDone <- err
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the first lone produce never reached the broker")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	bDone := make(chan error, 1)
	go func() {
		_, err := f.Forward(ctx, Traces, "team-b", big(2))
		bDone <- err
	}()
	answered := false
	select {
	case err := <-bDone:
		answered = true
		if err == nil {
			t.Error("a request whose context ended before it was produced was acknowledged")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("a request whose context ended 200ms in is still waiting 5s later, behind another request's produce")
	}
	release()
	if err := <-aDone; err != nil {
		t.Errorf("the first request: %v", err)
	}
	if !answered {
		<-bDone
	}
}

// A broker that answers every produce REQUEST_TIMED_OUT (a follower too
// slow to join the acks, for as long as it lasts) may have written the
// batch: franz-go's idempotent producer retries it and fails it neither
// at RecordDeliveryTimeout nor at its context's end (kgo's
// RecordDeliveryTimeout and Produce: not safe to fail once sent). A
// request waited in ProduceSync for as long, past its client's timeout,
// holding its handler, its max_inflight_bytes and a
// max_concurrent_requests slot, until the receivers refused every other
// request. A request whose context ended is answered then (to be
// retried); what the broker wrote of it stays written, once.
func TestForwardHonoursItsContextWhileTheBrokerTimesOut(t *testing.T) {
	const topic = "otlp_spans"
	c := kafkatest.Cluster(t, 1, topic)
	f, err := NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Forward(t.Context(), Traces, "team-a", []byte("first")); err != nil {
		t.Fatal(err)
	}
	// kfake appends a batch it answers REQUEST_TIMED_OUT (kfake/faults.go).
	timingOut := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.RequestTimedOut, Count: -1})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.Forward(ctx, Traces, "team-b", []byte("second"))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("acknowledged while every produce timed out")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request whose context ended 300ms in is still waiting 10s later, behind a broker timing out")
	}
	// The broker recovers: the record it wrote is there once, and the
	// producer goes on.
	timingOut.Remove()
	if _, err := f.Forward(t.Context(), Traces, "team-c", []byte("third")); err != nil {
		t.Fatal(err)
	}
	cons := kafkatest.Client(t, c, kgo.ConsumeTopics(topic))
	pctx, pcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer pcancel()
	var got []string
	for !slices.Contains(got, "third") && pctx.Err() == nil {
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Errorf("the topic holds %q, want first, second (written at the first timed-out produce) and third, once each", got)
	}
}

// The lone producer holds the message of a request whose client gave up
// until the brokers answer it. Refused as too large, it failed the
// message buffered behind it too, with its MESSAGE_TOO_LARGE (franz-go
// fails every record of the partition with a batch's error): a request
// that fits alone was answered 413, which clients do not retry, and its
// rows were lost. Judged alone, it is stored.
func TestForwardAloneIsNotRefusedForTheMessageAheadOfIt(t *testing.T) {
	const topic, limit = "otlp_spans", 1 << 20
	c := kafkatest.Cluster(t, 1)
	createTopic(t, c, topic, limit)
	partitioned := make(partitionedValues, 8)
	f, buffered := watchedForwarder(t, c, topic, partitioned)
	held, release := holdFirstProduce(c)
	defer release()

	// 3 MiB that do not compress: too large for the topic, even alone.
	tooLarge := make([]byte, 3<<20)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(tooLarge)
	gone, giveUp := context.WithCancel(t.Context())
	goneDone := make(chan error, 1)
	go func() { _, err := f.Forward(gone, Traces, "team-gone", tooLarge); goneDone <- err }()
	<-buffered
	<-held // sent: its client gives up while the broker judges it
	giveUp()
	if err := <-goneDone; err == nil {
		t.Fatal("a request whose client gave up before the brokers answered was acknowledged")
	}

	// 2 MiB that compress far under the limit: produced alone, it fits.
	fits := bytes.Repeat([]byte("\x0a\x12service.name\x12\x0a\x0acheckout-api\x1a\x10span-attribute-value"), (2<<20)/58)
	fitsDone := make(chan error, 1)
	go func() { _, err := f.Forward(t.Context(), Traces, "team-a", fits); fitsDone <- err }()
	<-buffered
	// Queued behind the message held, not buffered only: answered
	// before, the refusal would leave it a partition of its own, and
	// this would pass without judging it alone.
	<-partitioned // the message held
	<-partitioned
	release()
	if err := <-fitsDone; err != nil {
		t.Fatalf("a request that fits the topic alone, behind a message the broker refuses as too large: %v (ErrTooLarge, a 413: %v)", err, errors.Is(err, ErrTooLarge))
	}
	if stored := storedValues(t, c, topic)[string(fits)]; stored != 1 {
		t.Errorf("the request that fits stored %d times, want once", stored)
	}
}
