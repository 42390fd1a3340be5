package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
)

func cmdGen(ctx context.Context, args []string) error {
	fs := newFlagSet("gen")
	brokers := fs.String("brokers", "127.0.0.1:9092", "Kafka brokers, comma-separated")
	topic := fs.String("topic", "llm-traces", "topic to produce to")
	n := fs.Int("messages", 100000, "number of trace spans")
	partitions := fs.Int("partitions", 0, "create the topic with this many partitions if it does not exist (0: leave as is)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "random seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *n < 0 {
		return usagef("gen: --messages must be >= 0")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitComma(*brokers)...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	if *partitions > 0 {
		if err := ensureTopic(ctx, cl, *topic, *partitions); err != nil {
			return err
		}
	}
	start := time.Now()
	err = tracegen.Produce(ctx, cl, *topic, *n, *seed, progressFunc(*n, "producing traces"))
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("produced %d agent-trace spans to %s in %.1fs (%.0f/s)\n", *n, *topic, secs, float64(*n)/secs)
	return nil
}

// ensureTopic creates topic with the given partitions unless it exists.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// progressFunc returns a progress callback drawing a bar on a terminal, or
// nil when stderr is not one.
func progressFunc(total int, what string) func(int) {
	if !isatty.IsTerminal(os.Stderr.Fd()) {
		return nil
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	return func(done int) { _ = bar.Set(done) }
}
