package otlp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/otel"
)

// KafkaForwarder writes each accepted request as one message (an OTLP
// export request in protobuf, the layout of the OpenTelemetry Collector's
// Kafka exporter with encoding otlp_proto) to its signal's topic, with the
// tenant and the signal (otel.SignalHeader) in headers, and returns once
// the brokers acknowledged it: an
// idempotent producer with acks=all, so a retried produce never writes
// the message twice.
type KafkaForwarder struct {
	cl     *kgo.Client
	topics map[string]string
	header string
}

// NewKafkaForwarder returns a forwarder over a client made from opts
// (kafka.ClientOptions). topics maps each signal to its topic; a signal
// without one is refused. maxBytes is the largest request forwarded.
func NewKafkaForwarder(opts []kgo.Opt, topics map[string]string, tenantHeader string, maxBytes int64) (*KafkaForwarder, error) {
	cl, err := kgo.NewClient(append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence needs it; also franz-go's default
		kgo.ProducerBatchMaxBytes(int32(min(maxBytes+1<<16, 1<<30))),
		// A client waiting on a dead cluster gets 503 and retries,
		// rather than holding its request for ever.
		kgo.RecordDeliveryTimeout(30*time.Second),
	)...)
	if err != nil {
		return nil, fmt.Errorf("OTLP forward: Kafka client: %w", err)
	}
	return &KafkaForwarder{cl: cl, topics: topics, header: tenantHeader}, nil
}

// Forward implements Forwarder.
// Rows a loader later dead-letters are not known by then: a forwarded
// request is never answered with a partial success.
func (f *KafkaForwarder) Forward(ctx context.Context, signal, tenant string, body []byte) (Stored, error) {
	topic := f.topics[signal]
	if topic == "" {
		return Stored{}, fmt.Errorf("no topic for OTLP %s (otlp.forward)", signal)
	}
	rec := &kgo.Record{Topic: topic, Value: body, Headers: []kgo.RecordHeader{
		{Key: f.header, Value: []byte(tenant)}, {Key: otel.SignalHeader, Value: []byte(signal)}}}
	err := f.cl.ProduceSync(ctx, rec).FirstErr()
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		return Stored{}, fmt.Errorf("%w: topic %s refuses a message of %d bytes (its max.message.bytes): %w", ErrTooLarge, topic, len(body), err)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("produce to %s: %w", topic, err)
	}
	return Stored{}, nil
}

// Close flushes and closes the producer.
func (f *KafkaForwarder) Close() { f.cl.Close() }
