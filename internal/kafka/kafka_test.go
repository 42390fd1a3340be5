package kafka

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

// syncBuffer is a log destination written by franz-go's goroutines and
// read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A group member commits a partition's start before it has polled
// anything (the pipeline records the start of a partition with no
// position so, in its offset adjustment). franz-go then has no
// uncommitted map and logged "received an OffsetCommitResponse after our
// group session has ended ... (were we kicked from the group?)" at warn:
// every first start of a run (and each demo) showed that warning in its
// log and on the status page, though the commit had succeeded and nobody
// had been kicked. The commit's own response must decide, not that
// bookkeeping note.
func TestFirstCommitBeforePollIsNoWarning(t *testing.T) {
	const topic = "t"
	c := kafkatest.Cluster(t, 2, topic)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clientSet := make(chan *kgo.Client, 1)
	committed := make(chan error, 1)
	var once sync.Once
	cl := kafkatest.Client(t, c, SlogAdapter(log),
		kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			once.Do(func() {
				// The callback may run before NewClient returned (so
				// the pipeline waits for its client, as here).
				committed <- commitStart(ctx, <-clientSet, topic)
			})
			return offsets, nil
		}))
	clientSet <- cl
	go cl.PollFetches(ctx) // joins the group; nothing to read
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("no assignment within a minute")
	}
	if got := logs.String(); strings.Contains(got, "level=WARN") {
		t.Errorf("a successful commit of a start before the first poll logged a warning:\n%s", got)
	}
}

// commitStart commits offset 0 of partition 0 through the group and
// returns the response's error, if any.
func commitStart(ctx context.Context, cl *kgo.Client, topic string) error {
	var commitErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 0}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if rp.ErrorCode != 0 {
							commitErr = kerr.ErrorForCode(rp.ErrorCode)
						}
					}
				}
			}
		})
	return commitErr
}
