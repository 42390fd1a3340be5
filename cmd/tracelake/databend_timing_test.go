package main

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// BenchmarkDatabendCPU measures tracelake's own CPU per row through the
// Databend sink: `tracelake run --exit-when-idle` runs as a child process
// (the reference's config file: batches of 10,000, 5 files per COPY, zstd
// staging, presigned uploads) against the test server, and the child's
// user+system CPU from getrusage is divided by the rows. Kafka (kfake) and
// the test server run in this, the parent, process, so their CPU is not
// counted. The yardstick of the same run: a bare franz-go group consumer
// reading the same records in this process.
func BenchmarkDatabendCPU(b *testing.B) {
	const n = 200_000
	bin := buildBinary(b)
	cluster, cl := startKafka(b, 4)
	if err := tracegen.Produce(context.Background(), cl, testTopic, n, 1, nil); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		// Yardstick: bare consume of the same records.
		start := time.Now()
		bare, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(testTopic),
			kgo.ConsumerGroup(fmt.Sprintf("bare-%d-%d", i, time.Now().UnixNano())), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		for got := 0; got < n; {
			got += bare.PollRecords(context.Background(), 10000).NumRecords()
		}
		bare.Close()
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "bare-consume-records/s")

		srv := databendtest.New("cloudapp", "s3cret")
		cfgPath := referenceConfig(b, cluster, srv, "s3cret", map[string]any{
			"KafkaConsumerGroup": fmt.Sprintf("cpu-%d-%d", i, time.Now().UnixNano()), "batchSize": 10000, "workers": 2,
		})
		cmd := exec.Command(bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
		start = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		wall := time.Since(start) - time.Second // the idle wait
		srv.Close()
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		b.ReportMetric(float64(cpu.Microseconds())/n, "tracelake-CPU-µs/row")
		b.ReportMetric(float64(n)/wall.Seconds(), "records/s")
	}
}
