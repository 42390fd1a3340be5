package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // clients may send gzip (zstd and snappy: grpc_compression.go)
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// newGRPCServer serves the OTLP TraceService, LogsService and
// MetricsService Export calls. A call's message comes to its handler as
// the bytes that came (rawCodec) and is decoded once, as an OTLP/HTTP
// body is (accept); the answer goes as pdata marshals it.
func (r *Receivers) newGRPCServer() *grpc.Server {
	allowZstdWindow(r.opt.MaxBodyBytes)
	// gRPC bounds a message as sent and once decompressed alike: the
	// bound as sent is compressedBound's, and acceptGRPC refuses a
	// message past MaxBodyBytes.
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(compressedBound(r.opt.MaxBodyBytes))), grpc.InTapHandle(r.admitGRPC),
		grpc.ForceServerCodecV2(rawCodec{})}
	if r.opt.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(r.opt.TLS.Clone())))
	}
	s := grpc.NewServer(opts...)
	for method, name := range grpcMethods {
		service, _ := strings.CutSuffix(strings.TrimPrefix(method, "/"), "/Export")
		sig := &signals[slices.IndexFunc(signals, func(s signal) bool { return s.name == name })]
		s.RegisterService(&grpc.ServiceDesc{
			ServiceName: service,
			HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{MethodName: "Export", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				return r.exportGRPC(ctx, sig, dec)
			}}},
		}, nil)
	}
	return s
}

// rawCodec is the gRPC server's codec: a call's message is taken as its
// bytes (*[]byte), an answer sent as the bytes given ([]byte).
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("BUG: an OTLP/gRPC answer of %T, not bytes", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("BUG: an OTLP/gRPC message read into %T, not bytes", v)
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// grpcMethods are the signals of the Export methods served, by gRPC's
// full method name (opentelemetry-proto's collector services).
var grpcMethods = map[string]string{
	"/opentelemetry.proto.collector.trace.v1.TraceService/Export":     Traces,
	"/opentelemetry.proto.collector.logs.v1.LogsService/Export":       Logs,
	"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export": Metrics,
}

// admitGRPC admits a call within MaxConcurrent as its headers arrive,
// before gRPC reads its message: one over the bound is refused with its
// message neither read nor decoded (admitted in the handler, a burst of
// calls each held its message and its decoded request, up to several
// times MaxBodyBytes each, before all but MaxConcurrent were refused). A
// call holds its place until its stream ends or, once its handler runs,
// until its handler returns (exportGRPC).
func (r *Receivers) admitGRPC(ctx context.Context, info *tap.Info) (context.Context, error) {
	if ref := r.enter(); ref != nil {
		if signal, ok := grpcMethods[info.FullMethodName]; ok {
			r.answered("grpc", signal, ref, 0, 0)
		}
		return nil, r.grpcError(ref)
	}
	// The stream's context ends with it: a call whose handler never runs
	// (an unknown method, a message never sent or too large, a client
	// gone first) gives its place back then; and a message not come
	// within ReadTimeout ends it (a stalled client would hold its place
	// for as long as its connection lives).
	ctx, cancel := context.WithCancelCause(ctx)
	p := place{leave: context.AfterFunc(ctx, r.leave), cancel: cancel}
	if r.opt.ReadTimeout > 0 {
		p.late = time.AfterFunc(r.opt.ReadTimeout, func() { cancel(lateMessage{r.opt.ReadTimeout}) })
	}
	return context.WithValue(ctx, placeKey{}, p), nil
}

// lateMessage is the cause of a call's context ended by ReadTimeout: only
// it is a timeout; the context ends for other reasons too (the client
// gone, or gRPC's own refusal of the message, which ends the stream).
type lateMessage struct{ after time.Duration }

func (e lateMessage) Error() string {
	return fmt.Sprintf("the call's message did not come within %s (otlp.read_timeout)", e.after)
}

// placeKey keys a call's place in its context.
type placeKey struct{}

// place is a call's place until its handler takes it: leave stops the
// context.AfterFunc that gives it back when the stream ends, late (nil
// without a ReadTimeout) the timer that ends a stream whose message is
// late, cancel the call's context.
type place struct {
	leave  func() bool
	late   *time.Timer
	cancel context.CancelCauseFunc
}

// takePlace moves the call's place from its stream to its handler, which
// must then leave as it returns. The stream's context ends as the client
// gives up (its deadline, a cancel, a reset) while the handler may go on
// storing the message for a long while (directload answers a request it
// took once its load ends): freed then, the place let in calls past
// max_concurrent_requests. The handler calls release as it returns. An
// error: the call holds no place (its stream ended before its handler
// ran: the client is gone, or its message was late).
func (r *Receivers) takePlace(ctx context.Context) (place, error) {
	p, ok := ctx.Value(placeKey{}).(place)
	if !ok {
		return place{}, status.Error(codes.Internal, "BUG: an OTLP/gRPC call not admitted (admitGRPC)")
	}
	if !p.leave() {
		p.came()
		p.cancel(nil)
		return place{}, status.FromContextError(ctx.Err()).Err()
	}
	return p, nil
}

// came stops the timer of a late message: the message came (gRPC reads
// it as the handler decodes it, not before the handler runs).
func (p place) came() {
	if p.late != nil {
		p.late.Stop()
	}
}

// release gives back a place the handler took.
func (p place) release(r *Receivers) {
	p.came()
	r.leave()
	p.cancel(nil)
}

// exportGRPC authenticates, decodes and stores one call's message (its
// place taken by admitGRPC); a refusal becomes its gRPC status.
func (r *Receivers) exportGRPC(ctx context.Context, sig *signal, dec func(any) error) (any, error) {
	p, err := r.takePlace(ctx)
	if err != nil {
		return nil, err // not stored: its client, gone, sends it again
	}
	defer p.release(r)
	a, ref := r.acceptGRPC(ctx, sig, p, dec)
	r.answered("grpc", sig.name, ref, a.items, a.rejected)
	if ref != nil {
		return nil, r.grpcError(ref)
	}
	out, err := sig.response(a).MarshalProto()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return out, nil
}

// acceptGRPC takes the call's tenant from its metadata, then its message
// (within ReadTimeout of its headers), and accepts it as an OTLP/HTTP
// protobuf body.
func (r *Receivers) acceptGRPC(ctx context.Context, sig *signal, p place, dec func(any) error) (accepted, *refusal) {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(key string) string {
		if v := md.Get(key); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	sent, named := tenancy.NamedInMetadata(md)
	tenant, ref := r.tenant(sent, named, tenancy.Bearer(first("authorization")))
	if ref != nil {
		return accepted{}, ref
	}
	var body []byte
	err := dec(&body)
	p.came()
	if err != nil {
		// gRPC answers a message it cannot read itself (its status
		// written as RecvMsg fails, which ends the stream and so the
		// context): the refusal here is what is counted, so it must say
		// why, as the HTTP path's readBody does.
		var late lateMessage
		switch {
		case errors.As(context.Cause(ctx), &late):
			return accepted{}, &refusal{http.StatusRequestTimeout, codes.DeadlineExceeded, late.Error(), false}
		case status.Code(err) == codes.ResourceExhausted: // past MaxRecvMsgSize (compressedBound), as sent or decompressed
			return accepted{}, r.tooLarge()
		}
		return accepted{}, &refusal{http.StatusBadRequest, codes.InvalidArgument, "cannot read the call's message: " + err.Error(), false}
	}
	if int64(len(body)) > r.opt.MaxBodyBytes {
		return accepted{}, r.tooLarge()
	}
	return r.accept(ctx, sig, tenant, body, false)
}

// grpcError is a refusal as its gRPC status, with RetryInfo when the
// client should retry (the OTLP specification's retryable Unavailable).
func (r *Receivers) grpcError(ref *refusal) error {
	st := status.FromProto(ref.status())
	if ref.retry {
		if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.opt.RetryAfter)}); err == nil {
			st = withInfo
		}
	}
	return st.Err()
}
