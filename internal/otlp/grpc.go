package otlp

import (
	"context"
	"net/http"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // clients may send gzip (zstd and snappy: grpc_compression.go)
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// newGRPCServer serves the OTLP TraceService, LogsService and
// MetricsService Export calls (pdata's gRPC bindings).
func (r *Receivers) newGRPCServer() *grpc.Server {
	allowZstdWindow(r.opt.MaxBodyBytes)
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(r.opt.MaxBodyBytes)), grpc.InTapHandle(r.admitGRPC)}
	if r.opt.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(r.opt.TLS.Clone())))
	}
	s := grpc.NewServer(opts...)
	ptraceotlp.RegisterGRPCServer(s, &traceService{r: r})
	plogotlp.RegisterGRPCServer(s, &logsService{r: r})
	pmetricotlp.RegisterGRPCServer(s, &metricsService{r: r})
	return s
}

type traceService struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receivers
}

func (s *traceService) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	a, err := s.r.exportGRPC(ctx, Traces, req, req.Traces().SpanCount())
	return tracesResponse(a), err
}

type logsService struct {
	plogotlp.UnimplementedGRPCServer
	r *Receivers
}

func (s *logsService) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	a, err := s.r.exportGRPC(ctx, Logs, req, req.Logs().LogRecordCount())
	return logsResponse(a), err
}

type metricsService struct {
	pmetricotlp.UnimplementedGRPCServer
	r *Receivers
}

func (s *metricsService) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	a, err := s.r.exportGRPC(ctx, Metrics, req, req.Metrics().DataPointCount())
	return metricsResponse(a), err
}

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
// call holds its place until its stream ends.
func (r *Receivers) admitGRPC(ctx context.Context, info *tap.Info) (context.Context, error) {
	if ref := r.enter(); ref != nil {
		if signal, ok := grpcMethods[info.FullMethodName]; ok {
			r.answered("grpc", signal, ref, 0, 0)
		}
		return nil, r.grpcError(ref)
	}
	context.AfterFunc(ctx, r.leave) // the stream's context ends with it
	return ctx, nil
}

// exportGRPC stores a decoded request; a refusal becomes its gRPC status.
func (r *Receivers) exportGRPC(ctx context.Context, signal string, req interface{ MarshalProto() ([]byte, error) }, items int) (accepted, error) {
	a, ref := r.storeGRPC(ctx, signal, req, items)
	r.answered("grpc", signal, ref, items, a.rejected)
	if ref == nil {
		return a, nil
	}
	return accepted{}, r.grpcError(ref)
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

// storeGRPC authenticates and stores one decoded request, admitted by
// admitGRPC.
func (r *Receivers) storeGRPC(ctx context.Context, signal string, req interface{ MarshalProto() ([]byte, error) }, items int) (accepted, *refusal) {
	if ref := r.serves(signal); ref != nil {
		return accepted{}, ref
	}
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(key string) string {
		if v := md.Get(key); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	token := tenancy.Bearer(first("authorization"))
	tenant, ref := r.tenant(first("x-scope-orgid"), token)
	if ref != nil || items == 0 {
		return accepted{}, ref
	}
	proto, err := req.MarshalProto()
	if err != nil {
		return accepted{}, &refusal{http.StatusInternalServerError, codes.Internal, err.Error(), false}
	}
	release, ref := r.hold(len(proto), 0)
	if ref != nil {
		return accepted{}, ref
	}
	defer release()
	return r.store(ctx, signal, tenant, proto, items)
}
