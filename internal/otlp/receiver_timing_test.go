package otlp

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"

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

// BenchmarkReceiverGRPC is BenchmarkReceiverHTTP over OTLP/gRPC: the same
// requests, sent as encoded (the clients marshal nothing), 4 at a time.
func BenchmarkReceiverGRPC(b *testing.B) {
	bodies, spans := otlptest.TraceRequests(b, 40, 50)
	r, err := Start(Options{GRPC: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: 1 << 30,
		DefaultTenant: "default", Forward: discardForward{}, Log: discardLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	conn, err := grpc.NewClient(r.Addr["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bytesCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	b.ResetTimer()
	start, cpu := time.Now(), rusageCPU()
	for range b.N {
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				for i := c; i < len(bodies); i += 4 {
					var answer []byte
					if err := conn.Invoke(context.Background(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export", bodies[i], &answer); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N*spans)/secs, "spans/s")
	b.ReportMetric(float64((rusageCPU()-cpu).Microseconds())/float64(b.N*spans), "cpu-µs/span")
}

// bytesCodec sends a call's message as the bytes given and takes its
// answer as bytes.
type bytesCodec struct{}

func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (bytesCodec) Name() string { return "proto" }

func rusageCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
