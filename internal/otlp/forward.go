package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/otel"
)

// KafkaForwarder writes each accepted request as one message (an OTLP
// export request in protobuf, the layout of the OpenTelemetry Collector's
// Kafka exporter with encoding otlp_proto) to its signal's topic, with the
// tenant and the signal (otel.SignalHeader) in headers, and returns once
// the brokers acknowledged it: an
// idempotent producer with acks=all, so a retried produce never writes
// the message twice.
//
// The producer groups concurrent requests into one record batch, and Kafka
// refuses a batch past the topic's max.message.bytes whole: each topic's
// batches are bounded by its limit, read from the brokers at start. A
// message past that limit before compression (the broker judges the
// compressed batch), or one whose batch the broker refused all the same
// (a limit guessed or changed since the start), is produced again alone,
// one at a time: only the broker's refusal of that lone message answers
// a request as too large.
type KafkaForwarder struct {
	cl     *kgo.Client
	topics map[string]string
	// topicSignals is each topic's otel.TopicSignalsHeader value.
	topicSignals map[string][]byte
	header       string
	// limits is each topic's max.message.bytes; read only once made.
	limits map[string]int32
	// alone produces one message at a time (its turn is the one slot of
	// aloneTurn): each is a batch of its own.
	alone     *kgo.Client
	aloneTurn chan struct{}
	// writes and aloneWrites count the Produce requests cl and alone
	// wrote (failedForAnother).
	writes, aloneWrites *produceWrites
	// maxRowBytes is the most bytes of rows the loaders of the topics
	// take of one message (their max_inflight_bytes, the run's: MaxRows).
	maxRowBytes int
}

// MaxRows implements RowBound: the loaders of the topics dead-letter a
// message whose rows take more than their max_inflight_bytes
// (otel.Decoder.WithMaxRowBytes), known here as the run's own, which
// forwarders and loaders share.
func (f *KafkaForwarder) MaxRows(signal string) (topic string, maxBytes int) {
	return f.topics[signal], f.maxRowBytes
}

// produceWrites counts the Produce requests a client wrote, each counted
// as its write returns (kgo's HookBrokerWrite), before the client reads
// the answer: a record failed after a request that may hold it was
// written sees it counted.
type produceWrites struct{ n atomic.Uint64 }

func (w *produceWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Produce) {
		w.n.Add(1)
	}
}

// aloneBatchBytes bounds the alone producer's batches: not the largest
// request body, as an OTLP/JSON request is forwarded re-encoded as
// protobuf, which can be several times larger; under the brokers' default
// socket.request.max.bytes (100 MiB) with room for the request around
// the batch. franz-go refuses a larger message itself, which the broker
// would refuse too.
const aloneBatchBytes = 99 << 20

// kafkaDefaultMaxMessageBytes is Kafka's default max.message.bytes (and
// message.max.bytes): 1 MiB plus the 12 bytes of a batch's offset and
// length.
const kafkaDefaultMaxMessageBytes = 1<<20 + 12

// deliveryTimeout bounds the wait for the brokers' answer to a request's
// message (produce; the producers' RecordDeliveryTimeout).
const deliveryTimeout = 30 * time.Second

// describeTimeout bounds asking the brokers for the topics' limits at start.
const describeTimeout = 10 * time.Second

// NewKafkaForwarder returns a forwarder over a client made from opts
// (kafka.ClientOptions). topics maps each signal to its topic; a signal
// without one is refused. maxBytes is the largest request the receivers
// take (otlp.max_body_bytes): a topic that takes less is logged.
// maxBuffered (max_inflight_bytes) bounds the records the producers hold
// for requests whose context ended before the brokers answered, and the
// rows of a request (MaxRows). It asks
// the brokers for each topic's max.message.bytes (DescribeConfigs) within
// ctx and describeTimeout.
func NewKafkaForwarder(ctx context.Context, opts []kgo.Opt, topics map[string]string, tenantHeader string, maxBytes, maxBuffered int64, log *slog.Logger) (*KafkaForwarder, error) {
	var names []string // the topics, once each (otlp.forward.topic takes all signals)
	for _, t := range topics {
		if t != "" && !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	limits, err := readLimits(ctx, opts, names)
	if err != nil {
		// Not a reason to refuse to start: a Kafka down at start comes
		// back (meanwhile requests are answered 503 and retried), and a
		// producer's principal may lack DescribeConfigs for good. Kafka's
		// default is what most topics keep. A wrong guess costs speed,
		// not requests: a message past it, or in a batch the broker
		// refuses, is produced again alone.
		log.Warn("OTLP forward: cannot read the topics' max.message.bytes; assuming Kafka's default",
			"topics", names, "max_message_bytes", kafkaDefaultMaxMessageBytes, "err", err)
		limits = make(map[string]int32, len(names))
		for _, t := range names {
			limits[t] = kafkaDefaultMaxMessageBytes
		}
	}
	for _, t := range names {
		if int64(limits[t]) < maxBytes {
			log.Warn("OTLP forward: a topic takes smaller messages than otlp.max_body_bytes; larger requests that do not compress under it are refused with 413",
				"topic", t, "max_message_bytes", limits[t], "max_body_bytes", maxBytes)
		}
	}
	produce := []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence needs it; also franz-go's default
		// A client waiting on a dead cluster gets 503 and retries,
		// rather than holding its request for ever.
		kgo.RecordDeliveryTimeout(deliveryTimeout),
	}
	// A request whose context ends before the brokers answer is answered
	// then (Forward), and its record stays buffered until they do: the
	// records so left are bounded by maxBuffered, past which a produce
	// waits (within its request's context) for room. Each client's bound
	// takes the largest record it produces, which it would otherwise
	// refuse as too large.
	writes, aloneWrites := new(produceWrites), new(produceWrites)
	var largest int64
	for _, l := range limits {
		largest = max(largest, int64(min(l, 1<<30)))
	}
	cl, err := kgo.NewClient(slices.Concat(opts, produce, []kgo.Opt{
		// franz-go counts a batch as the broker does plus 4 bytes, so a
		// batch it makes never passes the topic's limit.
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
			return min(max(limits[topic], 512), 1<<30) // franz-go's range; unknown topics: 512
		}),
		kgo.MaxBufferedBytes(int(max(maxBuffered, largest))),
		kgo.WithHooks(writes),
	})...)
	if err != nil {
		return nil, fmt.Errorf("OTLP forward: Kafka client: %w", err)
	}
	alone, err := kgo.NewClient(slices.Concat(opts, produce, []kgo.Opt{
		kgo.ProducerBatchMaxBytes(aloneBatchBytes),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedBytes(int(max(maxBuffered, aloneBatchBytes))),
		kgo.WithHooks(aloneWrites),
	})...)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("OTLP forward: Kafka client: %w", err)
	}
	return &KafkaForwarder{cl: cl, alone: alone, aloneTurn: make(chan struct{}, 1), topics: topics, topicSignals: topicSignals(topics),
		header: tenantHeader, limits: limits, writes: writes, aloneWrites: aloneWrites, maxRowBytes: int(min(maxBuffered, math.MaxInt))}, nil
}

// topicSignals is, for each topic of topics (signal → topic), the
// signals forwarded to it, comma separated (otel.TopicSignalsHeader).
func topicSignals(topics map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for _, sig := range []string{otel.SignalTraces, otel.SignalLogs, otel.SignalMetrics} {
		if t := topics[sig]; t != "" {
			if len(out[t]) > 0 {
				out[t] = append(out[t], ',')
			}
			out[t] = append(out[t], sig...)
		}
	}
	return out
}

// readLimits asks the brokers for each topic's max.message.bytes; a topic
// not created yet gets the broker's message.max.bytes, as it will when
// created without its own.
func readLimits(ctx context.Context, opts []kgo.Opt, topics []string) (map[string]int32, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	described, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("describe the configs of topics %v: %w", topics, err)
	}
	limits := make(map[string]int32, len(topics))
	for _, t := range topics {
		rc, err := described.On(t, nil)
		if err == nil {
			err = rc.Err
		}
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			continue
		case err != nil:
			return nil, fmt.Errorf("describe the configs of topic %s: %w", t, err)
		}
		if limits[t], err = configInt(rc, "max.message.bytes"); err != nil {
			return nil, err
		}
	}
	if len(limits) == len(topics) {
		return limits, nil
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		return nil, fmt.Errorf("list the brokers (for message.max.bytes): %w", errors.Join(err, errNoBroker))
	}
	bc, err := adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	if err == nil && len(bc) > 0 {
		err = bc[0].Err
	}
	if err != nil {
		return nil, fmt.Errorf("describe the configs of broker %d: %w", brokers[0].NodeID, err)
	}
	brokerLimit, err := configInt(bc[0], "message.max.bytes")
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		if _, ok := limits[t]; !ok {
			limits[t] = brokerLimit
		}
	}
	return limits, nil
}

var errNoBroker = errors.New("no broker")

// configInt is the value of key in rc, a positive int32.
func configInt(rc kadm.ResourceConfig, key string) (int32, error) {
	for _, c := range rc.Configs {
		if c.Key == key {
			n, err := strconv.ParseInt(c.MaybeValue(), 10, 32)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("%s of %q: want a positive number, got %q", key, rc.Name, c.MaybeValue())
			}
			return int32(n), nil
		}
	}
	return 0, fmt.Errorf("%s of %q: not in the brokers' answer", key, rc.Name)
}

// loneBatchBytes is the size of a record batch holding only rec, as
// franz-go counts it against ProducerBatchMaxBytes: past the topic's
// limit, the record can never be produced.
func loneBatchBytes(rec *kgo.Record) int {
	l := 1 + // attributes
		kbin.VarlongLen(0) + kbin.VarintLen(0) + // the first record's timestamp and offset deltas
		kbin.VarintLen(int32(len(rec.Key))) + len(rec.Key) +
		kbin.VarintLen(int32(len(rec.Value))) + len(rec.Value) +
		kbin.VarintLen(int32(len(rec.Headers)))
	for _, h := range rec.Headers {
		l += kbin.VarintLen(int32(len(h.Key))) + len(h.Key) + kbin.VarintLen(int32(len(h.Value))) + len(h.Value)
	}
	return 65 + kbin.VarintLen(int32(l)) + l
}

// record is the message of a request: its body, to its signal's topic
// ("" for a signal without one), its tenant, signal and topic's signals
// in headers.
func (f *KafkaForwarder) record(signal, tenant string, body []byte) *kgo.Record {
	topic := f.topics[signal]
	return &kgo.Record{Topic: topic, Value: body, Headers: []kgo.RecordHeader{
		{Key: f.header, Value: []byte(tenant)}, {Key: otel.SignalHeader, Value: []byte(signal)},
		{Key: otel.TopicSignalsHeader, Value: f.topicSignals[topic]}}}
}

// Forward implements Forwarder.
// Rows a loader later dead-letters are not known by then: a forwarded
// request is never answered with a partial success.
func (f *KafkaForwarder) Forward(ctx context.Context, signal, tenant string, body []byte) (Stored, error) {
	rec := f.record(signal, tenant, body)
	if rec.Topic == "" {
		return Stored{}, fmt.Errorf("no topic for OTLP %s (otlp.forward)", signal)
	}
	if loneBatchBytes(rec) > int(f.limits[rec.Topic]) {
		return f.produceAlone(ctx, rec)
	}
	err := produce(ctx, f.cl, f.writes, rec)
	if tooLarge(err) {
		// The message fits the limit read (or guessed) at start, but the
		// broker refused the batch it was in, whole: nothing of it was
		// written. Alone, it is judged on its own.
		return f.produceAlone(ctx, rec)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("produce to %s: %w", rec.Topic, err)
	}
	return Stored{}, nil
}

// produceAlone produces rec in a batch of its own: too large only if the
// broker refuses it so.
func (f *KafkaForwarder) produceAlone(ctx context.Context, rec *kgo.Record) (Stored, error) {
	select {
	case f.aloneTurn <- struct{}{}:
	case <-ctx.Done():
		return Stored{}, fmt.Errorf("produce to %s: waiting for the producer of large messages: %w", rec.Topic, ctx.Err())
	}
	defer func() { <-f.aloneTurn }()
	err := f.produceJudgedAlone(ctx, rec)
	if tooLarge(err) {
		return Stored{}, fmt.Errorf("%w: topic %s refuses a message of %d bytes alone (its max.message.bytes, %d when the forwarder started): %w",
			ErrTooLarge, rec.Topic, len(rec.Value), f.limits[rec.Topic], err)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("produce to %s: %w", rec.Topic, err)
	}
	return Stored{}, nil
}

// produceJudgedAlone produces rec with the lone producer (its turn held)
// until a refusal as too large can only be its own. The records of
// requests whose clients gave up stay in the producer until the brokers
// answer them (produce), and franz-go fails every record buffered for a
// partition with the error of a batch refused: a request that fits alone,
// behind a message refused as too large, was answered 413, which clients
// do not retry. Each record ahead of rec, none added while the turn is
// held, can fail it so once at most: its refusal empties the partition.
func (f *KafkaForwarder) produceJudgedAlone(ctx context.Context, rec *kgo.Record) error {
	ahead := f.alone.BufferedProduceRecords()
	err := produce(ctx, f.alone, f.aloneWrites, rec)
	for ; tooLarge(err) && ahead > 0; ahead-- {
		err = produce(ctx, f.alone, f.aloneWrites, rec)
	}
	return err
}

// produce produces rec with cl and returns the brokers' answer, or, once
// ctx ends, that there is none yet. franz-go's idempotent producer fails a
// record it sent neither at its context's end nor at
// RecordDeliveryTimeout (kgo's Produce and RecordDeliveryTimeout: the
// broker may have written it), and retries it for as long as the broker
// answers a retryable error (REQUEST_TIMED_OUT, the connection lost): the
// request waited as long, past its client's timeout, holding its handler
// and its share of max_inflight_bytes and max_concurrent_requests, until
// every other request was refused. Answered an error, its client retries;
// the record, written or not, keeps its place in the producer (the answer
// is an error either way, so a copy at most, which the dedup model
// keeps once).
// The wait is bounded by deliveryTimeout too, for a client without a
// timeout of its own. writes counts cl's Produce requests.
//
// Each attempt produces a record of its own, a copy of rec: franz-go keeps
// a record's state (its Context, set to the first Produce's context,
// which ends as the attempt returns), and a record produced again after a
// refusal failed at once with "context canceled".
func produce(ctx context.Context, cl *kgo.Client, writes *produceWrites, rec *kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	defer cancel()
	for {
		before := writes.n.Load()
		err := produceOnce(ctx, cl, rec)
		if !failedForAnother(ctx, err) {
			return err
		}
		// franz-go fails a partition's records with its first one's
		// ended context whenever that batch was answered since it was
		// last sent, not only while none of them may have been written:
		// a batch written whose answer was lost (the connection broke)
		// is sent again, and a NOT_LEADER_FOR_PARTITION to that retry
		// lets franz-go fail it and the batches behind it, which the
		// brokers hold. Produced again then, a request was stored twice
		// and acknowledged once. Only while no Produce request that may
		// hold the attempt's record was written is it certainly
		// unwritten; else it is answered as failed (503: its client's
		// retry is a copy README documents).
		if writes.n.Load() != before {
			return fmt.Errorf("failed with a message ahead of it whose request ended, after a produce that may hold both: %w", err)
		}
	}
}

// failedForAnother reports whether err, an attempt's answer, is the end
// of another record's context while ctx lives. franz-go fails every
// record buffered for a partition when the first one's context ends
// (kgo's maybeFailErr, waitUnknownTopic: only the first record's context
// is looked at): a request still waiting, buffered behind one whose
// client gave up, was answered 503 though the brokers would take it.
// Unwritten (produce), it is produced again.
func failedForAnother(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// produceOnce produces a copy of rec with cl and returns the brokers'
// answer, or, once ctx ends, that there is none yet.
func produceOnce(ctx context.Context, cl *kgo.Client, rec *kgo.Record) error {
	answer := make(chan error, 1)
	attempt := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
	cl.Produce(ctx, attempt, func(_ *kgo.Record, err error) { answer <- err })
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		select {
		case err := <-answer: // answered meanwhile: that answer holds
			return err
		default:
			return fmt.Errorf("the brokers did not answer before the request ended (the message may still be written): %w", ctx.Err())
		}
	}
}

func tooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// Close flushes and closes the producers.
func (f *KafkaForwarder) Close() {
	f.cl.Close()
	f.alone.Close()
}
