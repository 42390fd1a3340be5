package otlp

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otlp/otlptest"
)

// discardForward is a Forwarder that stores nothing: the receiver alone.
type discardForward struct{}

func (discardForward) Forward(context.Context, string, string, []byte) (Stored, error) {
	return Stored{}, nil
}

// BenchmarkReceiverHTTP is the OTLP/HTTP receiver's own cost per span:
// 4 clients post protobuf requests of 50 agent traces (~250 spans, as an
// SDK's batch exporter sends) to a receiver whose forward does nothing.
// CPU is the whole process's (the clients' HTTP too).
func BenchmarkReceiverHTTP(b *testing.B) {
	bodies, spans := otlptest.TraceRequests(b, 40, 50)
	r, err := Start(Options{HTTP: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: 1 << 30,
		DefaultTenant: "default", Forward: discardForward{}, Log: discardLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	url := "http://" + r.Addr["http"] + "/v1/traces"
	b.ResetTimer()
	start, cpu := time.Now(), rusageCPU()
	for range b.N {
		otlptest.PostAll(b, url, bodies, 4)
	}
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N*spans)/secs, "spans/s")
	b.ReportMetric(float64((rusageCPU()-cpu).Microseconds())/float64(b.N*spans), "cpu-µs/span")
}

func rusageCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
