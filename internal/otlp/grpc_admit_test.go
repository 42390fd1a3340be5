package otlp

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// A gRPC call over max_concurrent_requests is refused as its headers
// arrive (Unavailable, with RetryInfo), before its message is read or
// decoded: here a call that never sends its message is answered at once,
// where admitted in the handler it waited for a message to decode first.
// An admitted call holds its place until its stream ends, and no longer.
func TestGRPCCallsOverTheBoundAreRefusedBeforeTheirMessage(t *testing.T) {
	pb, _ := traceRequest(t, 2)
	held := &forwarded{block: make(chan struct{})}
	r := start(t, held, func(o *Options) { o.MaxConcurrent = 1 })
	release := sync.OnceFunc(func() { close(held.block) })
	t.Cleanup(release) // before the receiver's shutdown, which waits for the held call
	conn := grpcConn(t, r)
	client := ptraceotlp.NewGRPCClient(conn)
	req := exportRequest(t, pb)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t")
	first := make(chan error, 1)
	go func() {
		_, err := client.Export(ctx, req)
		first <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for r.inflight.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first call never started forwarding")
		}
		time.Sleep(time.Millisecond) // polling a condition: the receiver's in-flight bytes
	}

	// Headers only: the message never comes.
	callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, err := conn.NewStream(callCtx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
	if err != nil {
		t.Fatal(err)
	}
	err = stream.RecvMsg(new(emptypb.Empty))
	st := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if st.Code() != codes.Unavailable || retry == nil {
		t.Fatalf("a call over max_concurrent_requests, its message not sent: %v (retry info %v), want Unavailable with RetryInfo before its message", err, retry)
	}

	release()
	if err := <-first; err != nil {
		t.Fatalf("the admitted call: %v", err)
	}
	// Its place is free once its stream ended: the next call goes.
	for {
		_, err := client.Export(ctx, req)
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline.Add(10*time.Second)) {
			t.Fatalf("a call after the admitted one ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the first stream's end frees its place as its context ends
	}
}

// ctxForwarder blocks every Forward until block closes, like package
// directload's, which answers a request it took once its load ends, the
// client gone or not; ended closes once a call's context has ended.
type ctxForwarder struct {
	block, ended chan struct{}
	once         sync.Once
	calls        atomic.Int64
}

func (f *ctxForwarder) Forward(ctx context.Context, _, _ string, _ []byte) (Stored, error) {
	f.calls.Add(1)
	go func() {
		<-ctx.Done()
		f.once.Do(func() { close(f.ended) })
	}()
	<-f.block
	return Stored{}, nil
}

// A call whose client gave up (its deadline passed, or it cancelled) while
// its message was being stored holds its place until its handler returns:
// its stream's context ends at once, and with the place freed then, the
// receiver took more than max_concurrent_requests calls at a time (each a
// request held and being stored).
func TestGRPCCallHoldsItsPlaceUntilItsHandlerReturns(t *testing.T) {
	pb, _ := traceRequest(t, 2)
	req := exportRequest(t, pb)
	for _, giveUp := range []string{"deadline", "cancel"} {
		t.Run(giveUp, func(t *testing.T) {
			fwd := &ctxForwarder{block: make(chan struct{}), ended: make(chan struct{})}
			r := start(t, fwd, func(o *Options) { o.MaxConcurrent = 1 })
			release := sync.OnceFunc(func() { close(fwd.block) })
			t.Cleanup(release) // before the receiver's shutdown, which waits for the held call
			client := ptraceotlp.NewGRPCClient(dial(t, r))
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t")

			first, stop := context.WithTimeout(ctx, time.Minute)
			if giveUp == "deadline" {
				first, stop = context.WithTimeout(ctx, 300*time.Millisecond)
			}
			defer stop()
			done := make(chan error, 1)
			go func() {
				_, err := client.Export(first, req)
				done <- err
			}()
			if giveUp == "cancel" {
				deadline := time.Now().Add(10 * time.Second)
				for fwd.calls.Load() == 0 {
					if time.Now().After(deadline) {
						t.Fatal("the first call never started forwarding")
					}
					time.Sleep(time.Millisecond) // polling a condition: the forwarder's calls
				}
				stop()
			}
			if err := <-done; status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
				t.Fatalf("the first call: %v, want it given up", err)
			}
			<-fwd.ended // the first call's stream (its handler's context) ended; its handler still stores

			second, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := client.Export(second, req)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("a second call while the first is still being stored, max_concurrent_requests 1: %v (forward calls %d), want Unavailable", err, fwd.calls.Load())
			}
			if n := r.requests.Load(); n != 1 {
				t.Fatalf("%d requests in progress, want 1", n)
			}
			release()
			deadline := time.Now().Add(10 * time.Second)
			for r.requests.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d requests in progress after every handler returned, want 0", r.requests.Load())
				}
				time.Sleep(time.Millisecond) // polling a condition: the handler's return frees its place
			}
		})
	}
}

// A request whose body (HTTP) or message (gRPC) does not arrive within
// ReadTimeout is dropped and its place given back: stalled clients, as
// many as max_concurrent_requests, held every place for as long as their
// connections lived, and every other client was refused.
func TestStalledRequestsGiveTheirPlaceBack(t *testing.T) {
	pb, _ := traceRequest(t, 2)
	fwd := &forwarded{}
	var mu sync.Mutex
	var outcomes []string
	r := start(t, fwd, func(o *Options) {
		o.MaxConcurrent, o.ReadTimeout = 1, 300*time.Millisecond
		o.Answered = func(protocol, _, outcome string, _ int) {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, protocol+" "+outcome)
		}
	})
	conn := grpcConn(t, r)
	req := exportRequest(t, pb)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t")
	for _, stall := range []struct {
		name  string
		start func(t *testing.T)
	}{
		{"gRPC headers without a message", func(t *testing.T) {
			if _, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/opentelemetry.proto.collector.trace.v1.TraceService/Export"); err != nil {
				t.Fatal(err)
			}
		}},
		{"HTTP headers and part of a body", func(t *testing.T) {
			c, err := net.Dial("tcp", r.Addr["http"])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nX-Scope-OrgID: t\r\nContent-Length: %d\r\n\r\n", len(pb))
			if _, err := c.Write(pb[:len(pb)/2]); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(stall.name, func(t *testing.T) {
			stall.start(t)
			deadline := time.Now().Add(10 * time.Second)
			for r.requests.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the stalled request never took a place")
				}
				time.Sleep(time.Millisecond) // polling a condition: the receiver's requests in progress
			}
			for r.requests.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the stalled request still holds its place after %s (read_timeout %s)", 10*time.Second, r.opt.ReadTimeout)
				}
				time.Sleep(10 * time.Millisecond) // polling a condition: the place given back
			}
			if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, req); err != nil {
				t.Fatalf("a call once the stalled one was dropped: %v", err)
			}
		})
	}
	if got := len(fwd.stored()); got != 2 {
		t.Errorf("%d requests stored, want the 2 whole ones", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"grpc timeout", "grpc accepted", "http timeout", "grpc accepted"}; !slices.Equal(outcomes, want) {
		t.Errorf("answers counted %q, want %q", outcomes, want)
	}
}

// grpcConn is a plaintext client connection to r's OTLP/gRPC receiver,
// closed when the test ends.
func grpcConn(t *testing.T, r *Receivers) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(r.Addr["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// exportRequest is pb, a traces export request in protobuf, decoded.
func exportRequest(t *testing.T, pb []byte) ptraceotlp.ExportRequest {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(pb); err != nil {
		t.Fatal(err)
	}
	return req
}

// A gRPC message past otlp.max_body_bytes (as sent, or once decompressed)
// is refused ResourceExhausted and counted too_large, as README's
// max_body_bytes and an OTLP/HTTP body's 413 have it: read in the
// handler (the raw codec), gRPC's own refusal was answered InvalidArgument
// and counted invalid.
func TestGRPCMessagePastMaxBodyBytesIsResourceExhausted(t *testing.T) {
	pb, _ := traceRequest(t, 40)
	for _, compressor := range []string{"", "gzip"} {
		t.Run("compressor "+compressor, func(t *testing.T) {
			outcomes := make(chan string, 8)
			fwd := &forwarded{}
			r := start(t, fwd, func(o *Options) {
				o.MaxBodyBytes = int64(len(pb) / 2)
				o.Answered = func(protocol, _, outcome string, _ int) { outcomes <- protocol + " " + outcome }
			})
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "t")
			var opts []grpc.CallOption
			if compressor != "" {
				opts = append(opts, grpc.UseCompressor(compressor))
			}
			_, err := ptraceotlp.NewGRPCClient(grpcConn(t, r)).Export(ctx, exportRequest(t, pb), opts...)
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("a message of %d bytes, max_body_bytes %d: %v, want ResourceExhausted", len(pb), r.opt.MaxBodyBytes, err)
			}
			if n := len(fwd.stored()); n != 0 {
				t.Fatalf("%d requests stored", n)
			}
			// gRPC writes its refusal to the client as the handler's read
			// fails, before the handler returns and counts it: the count
			// is awaited.
			select {
			case got := <-outcomes:
				if got != "grpc too_large" {
					t.Errorf("answer counted %q, want \"grpc too_large\"", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the answer was never counted")
			}
			r.Shutdown(context.Background())
			if len(outcomes) > 0 {
				t.Errorf("more answers counted: %q", <-outcomes)
			}
		})
	}
}
