package otlp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Forwarder stores one accepted request durably, or says why it cannot.
// The receiver answers the client only after Forward returned nil.
type Forwarder interface {
	Forward(ctx context.Context, signal, tenant string, body []byte) (Stored, error)
}

// Stored is what became of a stored request's items.
type Stored struct {
	// Rejected items are in the dead-letter table, not their table (the
	// table refused a value; All: the whole request could not be read):
	// the client is told so in the answer's partial_success, and does
	// not send them again.
	Rejected int
	All      bool
	Reason   string
}

// rejected is the number of a request's items the answer reports rejected.
func (s Stored) rejected(items int) int {
	if s.All {
		return items
	}
	return min(s.Rejected, items)
}

// RowBound is a Forwarder whose destination refuses a request whose
// rows take more than some bytes: KafkaForwarder, whose topics' loaders
// dead-letter such a request whole after it was answered stored.
// MaxRows is the topic a signal's requests go to (their rows name it)
// and that bound, 0 for none.
type RowBound interface {
	MaxRows(signal string) (topic string, maxBytes int)
}

// ErrTooLarge is what a Forwarder returns for a request the destination
// will never take (Kafka's message size limit): the client is told not to
// retry it.
var ErrTooLarge = errors.New("the request is larger than the destination accepts")

// Options configure the receivers.
type Options struct {
	// HTTP and GRPC are listen addresses (host:port); "" leaves that
	// receiver off.
	HTTP, GRPC string
	// MaxBodyBytes bounds a request after decompression: past it, HTTP
	// 413 and gRPC ResourceExhausted.
	MaxBodyBytes int64
	// MaxInflightBytes bounds the request bytes held at once (read,
	// being decoded or forwarded), MaxConcurrent the requests in
	// progress: past either, HTTP 429 and gRPC Unavailable, both with a
	// retry delay. Bodies being read are bounded by MaxConcurrent ×
	// MaxBodyBytes.
	MaxInflightBytes int64
	MaxConcurrent    int
	// ReadTimeout bounds how long a request's body (HTTP) or message
	// (gRPC) may take to arrive: a slower one is dropped and its place
	// among MaxConcurrent given back. 0 for no bound.
	ReadTimeout time.Duration
	// TenantRequired refuses a request without a tenant (HTTP 401, gRPC
	// Unauthenticated); otherwise it is DefaultTenant's.
	TenantRequired bool
	DefaultTenant  string
	// TLS, when set, serves both receivers over TLS (mutual TLS when it
	// asks for client certificates).
	TLS *tls.Config
	// Tokens, when set, require a bearer token that may write the
	// tenant (tenancy.Resolver.Write decides).
	Tokens *tenancy.Tokens
	// RetryAfter is the delay suggested to clients told to retry: exact
	// in gRPC's RetryInfo, rounded up to whole seconds (at least 1) in
	// HTTP's Retry-After. Default 5s.
	RetryAfter time.Duration
	Forward    Forwarder
	// Signals, when set, are the only signals taken: another's requests
	// are answered HTTP 404 and gRPC Unimplemented, which clients do not
	// retry (a process loading one table takes its signal only).
	Signals []string
	Log     *slog.Logger
	// Answered, if set, is told of every answer: the protocol (http,
	// grpc), the signal, the outcome (accepted, partial, invalid,
	// too_large, unauthenticated, forbidden, throttled, unavailable,
	// error, not_served, timeout) and the items stored in their table.
	Answered func(protocol, signal, outcome string, items int)
}

// Receivers are the running OTLP receivers.
type Receivers struct {
	opt      Options
	tenants  tenancy.Resolver
	inflight atomic.Int64
	requests atomic.Int64 // in progress, for MaxConcurrent
	httpSrv  *http.Server
	grpcSrv  *grpc.Server
	// Addr are the addresses the receivers listen on (the port chosen
	// when the configured one is 0): "http" and "grpc".
	Addr map[string]string
	wg   sync.WaitGroup
}

// Start listens and serves until Shutdown.
func Start(opt Options) (*Receivers, error) {
	if opt.RetryAfter <= 0 {
		opt.RetryAfter = 5 * time.Second
	}
	r := &Receivers{opt: opt, Addr: map[string]string{},
		tenants: tenancy.Resolver{Tokens: opt.Tokens, Default: opt.DefaultTenant, Required: opt.TenantRequired}}
	if opt.HTTP != "" {
		ln, err := net.Listen("tcp", opt.HTTP)
		if err != nil {
			return nil, fmt.Errorf("OTLP/HTTP receiver: listen on %s: %w", opt.HTTP, err)
		}
		// Each server gets its own copy: net/http adds its protocols to it.
		r.httpSrv = &http.Server{Handler: r.httpHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: opt.ReadTimeout, TLSConfig: opt.TLS.Clone()}
		r.Addr["http"] = ln.Addr().String()
		r.serve(func() error {
			if opt.TLS != nil {
				return r.httpSrv.ServeTLS(ln, "", "")
			}
			return r.httpSrv.Serve(ln)
		})
	}
	if opt.GRPC != "" {
		ln, err := net.Listen("tcp", opt.GRPC)
		if err != nil {
			r.Shutdown(context.Background())
			return nil, fmt.Errorf("OTLP/gRPC receiver: listen on %s: %w", opt.GRPC, err)
		}
		r.grpcSrv = r.newGRPCServer()
		r.Addr["grpc"] = ln.Addr().String()
		r.serve(func() error { return r.grpcSrv.Serve(ln) })
	}
	for name, addr := range r.Addr {
		opt.Log.Info("OTLP receiver listening", "protocol", name, "addr", addr, "tls", opt.TLS != nil)
	}
	return r, nil
}

func (r *Receivers) serve(f func() error) {
	r.wg.Go(func() {
		if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			r.opt.Log.Error("OTLP receiver stopped", "err", err)
		}
	})
}

// Shutdown stops accepting requests and waits for the ones in progress
// (each waits for its forward) until ctx ends.
func (r *Receivers) Shutdown(ctx context.Context) {
	if r.httpSrv != nil {
		_ = r.httpSrv.Shutdown(ctx)
	}
	if r.grpcSrv != nil {
		done := make(chan struct{})
		go func() { r.grpcSrv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			r.grpcSrv.Stop()
		}
	}
	r.wg.Wait()
}

// refusal is why a request was not accepted, for either protocol.
type refusal struct {
	httpStatus int
	code       codes.Code
	msg        string
	retry      bool // the client should retry after RetryAfter
}

// status is the refusal as a google.rpc.Status, the answer of either
// protocol. Its message is made valid UTF-8: a Status whose message is not
// marshals in neither encoding (a proto3 string), and a decode error may
// quote the body's bytes; the 400 went out with an empty body.
func (ref *refusal) status() *spb.Status {
	return &spb.Status{Code: int32(ref.code), Message: strings.ToValidUTF8(ref.msg, "\uFFFD")}
}

// outcome names how a request was answered, for metrics.
func outcome(ref *refusal, rejected int) string {
	if ref == nil {
		if rejected > 0 {
			return "partial"
		}
		return "accepted"
	}
	switch ref.httpStatus {
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusTooManyRequests:
		return "throttled"
	case http.StatusServiceUnavailable:
		return "unavailable"
	case http.StatusInternalServerError:
		return "error"
	case http.StatusNotFound:
		return "not_served"
	case http.StatusRequestTimeout:
		return "timeout"
	default:
		return "invalid"
	}
}

// answered reports an answer to Options.Answered.
func (r *Receivers) answered(protocol, signal string, ref *refusal, items, rejected int) {
	if r.opt.Answered != nil {
		if ref != nil {
			items = 0
		}
		r.opt.Answered(protocol, signal, outcome(ref, rejected), items-rejected)
	}
}

// enter admits a request within MaxConcurrent; leave must follow an
// admission.
func (r *Receivers) enter() *refusal {
	if n := r.requests.Add(1); r.opt.MaxConcurrent > 0 && n > int64(r.opt.MaxConcurrent) {
		r.requests.Add(-1)
		return &refusal{http.StatusTooManyRequests, codes.Unavailable, "too many requests in progress (otlp.max_concurrent_requests): retry later", true}
	}
	return nil
}

func (r *Receivers) leave() { r.requests.Add(-1) }

// tenant picks the request's tenant from what its header or metadata
// names (tenancy.Named's answer: the tenant, "" for none, or why it names
// none that can be taken) and the token it showed.
func (r *Receivers) tenant(sent string, named error, token string) (string, *refusal) {
	if named != nil {
		return "", tenantRefusal(named)
	}
	t, err := r.tenants.Write(sent, token)
	if err != nil {
		return "", tenantRefusal(err)
	}
	return t, nil
}

// tenantRefusal answers a refusal of package tenancy by its kind.
func tenantRefusal(err error) *refusal {
	var e *tenancy.Error
	if !errors.As(err, &e) { // not so today: every refusal is an *Error
		return &refusal{http.StatusInternalServerError, codes.Internal, err.Error(), false}
	}
	switch e.Kind {
	case tenancy.Unauthenticated:
		return &refusal{http.StatusUnauthorized, codes.Unauthenticated, e.Msg, false}
	case tenancy.Forbidden:
		return &refusal{http.StatusForbidden, codes.PermissionDenied, e.Msg, false}
	default:
		return &refusal{http.StatusBadRequest, codes.InvalidArgument, e.Msg, false}
	}
}

// accepted is a request stored: its items (spans, log records, points)
// and how many of them the answer reports rejected, with the reason.
type accepted struct {
	items, rejected int
	reason          string
}

// accept decodes a request body of sig and stores it.
func (r *Receivers) accept(ctx context.Context, sig *signal, tenant string, body []byte, isJSON bool) (accepted, *refusal) {
	if ref := r.serves(sig.name); ref != nil {
		return accepted{}, ref
	}
	release, ref := r.hold(len(body), 0)
	if ref != nil {
		return accepted{}, ref
	}
	defer release()
	proto, items, data, err := sig.decode(body, isJSON)
	if err != nil {
		return accepted{}, &refusal{http.StatusBadRequest, codes.InvalidArgument, fmt.Sprintf("not an OTLP %s export request: %v", sig.name, err), false}
	}
	if ref := r.rowsRefusal(sig.name, tenant, data, len(proto), items); ref != nil {
		return accepted{}, ref
	}
	if isJSON { // its protobuf is a second copy, of the same request
		releaseProto, ref := r.hold(len(proto), len(body))
		if ref != nil {
			return accepted{}, ref
		}
		defer releaseProto()
	}
	return r.store(ctx, sig.name, tenant, proto, items)
}

// rowsRefusal refuses, HTTP 413 and gRPC InvalidArgument (not retried), a
// request whose rows would take more than the Forwarder's RowBound
// (otel.RowsOver): its loaders would dead-letter it whole after it was
// answered stored, and every retry would be refused the same way.
func (r *Receivers) rowsRefusal(signal, tenant string, data any, protoBytes, items int) *refusal {
	rb, ok := r.opt.Forward.(RowBound)
	if !ok || items == 0 {
		return nil
	}
	topic, limit := rb.MaxRows(signal)
	if limit <= 0 {
		return nil
	}
	over, err := otel.RowsOver(data, protoBytes, topic, tenant, limit)
	if err != nil {
		return &refusal{http.StatusInternalServerError, codes.Internal, err.Error(), false}
	}
	if !over {
		return nil
	}
	return &refusal{http.StatusRequestEntityTooLarge, codes.InvalidArgument,
		fmt.Sprintf("the request's %d %s decode to more than %d bytes of rows (max_inflight_bytes: each row repeats its resource's and scope's attributes), which the loaders refuse: send fewer per request, or smaller attributes",
			items, itemNames[signal], limit), false}
}

// serves refuses the requests of a signal not taken (Options.Signals).
func (r *Receivers) serves(signal string) *refusal {
	if r.opt.Signals != nil && !slices.Contains(r.opt.Signals, signal) {
		return &refusal{http.StatusNotFound, codes.Unimplemented,
			fmt.Sprintf("this receiver takes %s only (otlp.mode load loads kafka.signal into its table)", strings.Join(r.opt.Signals, ", ")), false}
	}
	return nil
}

// hold takes n bytes of MaxInflightBytes while a request is decoded and
// forwarded, or refuses the request when they are taken; release gives
// them back. own is what the same request holds already (an OTLP/JSON
// body, when its protobuf copy is held). A request alone always goes,
// however large (it passed MaxBodyBytes): refused, it would be refused
// again at every retry, with nothing else in flight.
func (r *Receivers) hold(n, own int) (release func(), ref *refusal) {
	size := int64(n)
	if total := r.inflight.Add(size); total > r.opt.MaxInflightBytes && total != size+int64(own) {
		r.inflight.Add(-size)
		return nil, &refusal{http.StatusTooManyRequests, codes.Unavailable, "too much data in flight (max_inflight_bytes): retry later", true}
	}
	return func() { r.inflight.Add(-size) }, nil
}

// store forwards a request (protobuf, held) of items items.
func (r *Receivers) store(ctx context.Context, signal, tenant string, proto []byte, items int) (accepted, *refusal) {
	if items == 0 {
		return accepted{}, nil // nothing to store
	}
	st, err := r.opt.Forward.Forward(ctx, signal, tenant, proto)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return accepted{}, &refusal{http.StatusRequestEntityTooLarge, codes.InvalidArgument, err.Error(), false}
		}
		r.opt.Log.Warn("OTLP request not stored; the client is told to retry", "signal", signal, "err", err)
		return accepted{}, &refusal{http.StatusServiceUnavailable, codes.Unavailable, "the request could not be stored: retry later", true}
	}
	a := accepted{items: items, rejected: st.rejected(items)}
	if a.rejected > 0 {
		a.reason = fmt.Sprintf("%d of %d %s went to the dead-letter table: %s", a.rejected, items, itemNames[signal], strings.ToValidUTF8(st.Reason, "\uFFFD"))
	}
	return a, nil
}

// compressedBound is the most bytes a request may take as sent, of which
// MaxBodyBytes (limit) bounds the decompressed size: content that does not
// compress (a bytes attribute, an image) comes larger compressed (deflate's
// stored blocks add 5 bytes per 64 KiB, zstd's raw blocks 3 per 128 KiB,
// snappy's and lz4's framing well under 1%, each with a header). Bounded
// by limit as sent, a request within it once decompressed was refused as
// too large, which clients do not retry.
func compressedBound(limit int64) int64 { return limit + limit/64 + 64<<10 }

func (r *Receivers) tooLarge() *refusal {
	return &refusal{http.StatusRequestEntityTooLarge, codes.ResourceExhausted,
		fmt.Sprintf("the request is larger than otlp.max_body_bytes (%d bytes after decompression)", r.opt.MaxBodyBytes), false}
}
