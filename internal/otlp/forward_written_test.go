package otlp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

// answerLosingConn loses the answer to the first Produce request written
// on it while lose is set: the broker takes the request (the message is
// written) and the connection breaks before the producer reads the answer.
type answerLosingConn struct {
	net.Conn
	lose    *atomic.Bool
	mu      sync.Mutex
	pending bool
}

func (c *answerLosingConn) Write(p []byte) (int, error) {
	// A request is its length (4 bytes), then its API key (2 bytes).
	if len(p) >= 6 && p[4] == 0 && p[5] == byte(kmsg.Produce) && c.lose.CompareAndSwap(true, false) {
		c.mu.Lock()
		c.pending = true
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *answerLosingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	pending := c.pending
	c.mu.Unlock()
	if !pending {
		return c.Conn.Read(p)
	}
	// The answer arriving is the broker having written the message.
	if _, err := c.Conn.Read(p); err != nil {
		return 0, err
	}
	c.Conn.Close()
	return 0, net.ErrClosed
}

// A message written by the broker whose answer was lost (the connection
// broke: a broker restarting) is sent again, and the broker it is sent to
// now answers NOT_LEADER_FOR_PARTITION (the leadership moving in that
// restart). franz-go then takes the batch for unwritten: the first
// record's context having ended (its client gave up), it fails every
// record of the partition with context.Canceled, although the broker
// holds them. The record of a request whose client still waits was
// produced again as if unwritten and answered 200: the request was
// stored twice though acknowledged once (no client retry, so no case
// of README's copies). Acknowledged, a request is stored once.
func TestForwardAcknowledgedIsStoredOnceWhenAnotherRequestsWrittenMessageIsFailed(t *testing.T) {
	const topic = "otlp_spans"
	c := kafkatest.Cluster(t, 1, topic)
	var lose atomic.Bool
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &answerLosingConn{Conn: conn, lose: &lose}, nil
	}
	buffered := make(bufferedValues, 8)
	f, err := NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.Dialer(dial), kgo.WithHooks(buffered)},
		map[string]string{Traces: topic}, "tenant", 8<<20, 64<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	gone, giveUp := context.WithCancel(t.Context())
	// The first Produce is written by the broker, its answer lost, and
	// the first request's client gives up meanwhile; the second is
	// answered NOT_LEADER_FOR_PARTITION; the rest are taken.
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		switch produces.Add(1) {
		case 1:
			giveUp()
			return nil, nil, false
		case 2:
			req := kreq.(*kmsg.ProduceRequest)
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewProduceResponseTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					sp := kmsg.NewProduceResponseTopicPartition()
					sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		default:
			c.DropControl()
			return nil, nil, false
		}
	})
	// Both wait for the topic's partitions, so they go in one batch, the
	// request whose client gives up first.
	released, release := closer()
	holdMetadata(c, topic, released)
	defer release()
	lose.Store(true)
	goneDone, waitingDone := forwardGoneThenWaiting(t, f, buffered, gone)
	release()
	if err := <-goneDone; err == nil {
		t.Error("a request whose client gave up before the brokers answered was acknowledged")
	}
	waitingErr := <-waitingDone
	if errors.Is(waitingErr, ErrTooLarge) {
		t.Errorf("a request of 7 bytes refused as too large: %v", waitingErr)
	}
	if produces.Load() < 2 {
		t.Fatalf("%d produce requests, want the written one and the one answered NOT_LEADER_FOR_PARTITION", produces.Load())
	}

	stored := storedValues(t, c, topic)
	t.Logf("the waiting request answered %v, stored %v", waitingErr, stored)
	if stored["gone"]+stored["waiting"] == 0 {
		t.Fatalf("stored %v: the first produce was not written", stored)
	}
	if waitingErr == nil && stored["waiting"] != 1 {
		t.Errorf("a request acknowledged once is stored %d times (stored %v)", stored["waiting"], stored)
	}
	if waitingErr != nil && stored["waiting"] > 1 {
		t.Errorf("a request refused is stored %d times (stored %v)", stored["waiting"], stored)
	}
}
