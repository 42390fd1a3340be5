// Package flightsql serves tracelake's read path over Arrow Flight SQL, for
// JDBC, ODBC and ADBC clients: read-only SQL over the tables a caller's
// scope may read, answered as a stream of Arrow record batches from a
// query.Reader. Updates, ingestion, transactions and Substrait plans are
// refused (PermissionDenied): the server only reads.
//
// Each call is made for the tenant its gRPC metadata names
// (x-scope-orgid) with the bearer token it shows (authorization: Bearer
// …), resolved by Tenants; tickets and prepared-statement handles carry
// the scope they were issued for and are refused to any other caller
// (see handle.go).
package flightsql

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Tenants resolves the scope of a call from the tenant it names (sent,
// "" when none) and its bearer token ("" when none). A refusal is a
// *tenancy.Error; its Kind picks the gRPC code.
type Tenants interface {
	Read(sent, token string) (tenancy.Scope, error)
}

// Options configure the server.
type Options struct {
	// Listen is the address served, host:port (port 0 picks one, see
	// Server.Addr). Required.
	Listen string
	// TLS, when set, serves Listen over TLS (mutual TLS when it asks for
	// client certificates).
	TLS *tls.Config
	// Reader answers the queries. Required.
	Reader query.Reader
	// Tenants resolves the callers. Required.
	Tenants Tenants
	// Version is the server version reported in GetSqlInfo. Default "dev".
	Version string
	// Catalog and DBSchema are the one catalog and schema the tables are
	// listed under in the metadata calls (GetCatalogs, GetDbSchemas,
	// GetTables): labels for tools that browse; queries name tables as
	// the Reader takes them. Defaults "tracelake" and "main".
	Catalog, DBSchema string
	// Log receives the server's messages. Default slog.Default().
	Log *slog.Logger
}

// Server is a running Flight SQL server.
type Server struct {
	// Addr is the address Listen is served on (the port chosen when it
	// was 0).
	Addr string

	log     *slog.Logger
	servers []*grpc.Server
	wg      sync.WaitGroup
	once    sync.Once
}

// Start listens and serves until Shutdown.
func Start(opt Options) (*Server, error) {
	if opt.Reader == nil || opt.Tenants == nil || opt.Listen == "" {
		return nil, errors.New("flightsql: Listen, Reader and Tenants are required")
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	h, err := newHandler(opt)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opt.Listen)
	if err != nil {
		return nil, fmt.Errorf("flightsql: listen on %s: %w", opt.Listen, err)
	}
	var creds []grpc.ServerOption
	if opt.TLS != nil {
		creds = append(creds, grpc.Creds(credentials.NewTLS(opt.TLS.Clone())))
	}
	s := &Server{log: opt.Log, Addr: ln.Addr().String()}
	s.serve(ln, h, opt.Tenants, creds...)
	return s, nil
}

// serve runs one gRPC server on ln whose callers tenants resolves.
func (s *Server) serve(ln net.Listener, h *handler, tenants Tenants, opts ...grpc.ServerOption) {
	opts = append(opts,
		grpc.ChainUnaryInterceptor(unaryScope(tenants)),
		grpc.ChainStreamInterceptor(streamScope(tenants), checkDoPut),
	)
	g := grpc.NewServer(opts...)
	flight.RegisterFlightServiceServer(g, newFlightServer(h))
	s.servers = append(s.servers, g)
	s.wg.Go(func() {
		if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("Flight SQL server stopped", "err", err)
		}
	})
}

// Shutdown stops taking calls and waits for those in progress until ctx
// ends; then it cancels the rest (their queries are released) and
// returns ctx's error. Safe twice, and on a nil Server.
func (s *Server) Shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	var err error
	s.once.Do(func() {
		done := make(chan struct{})
		go func() {
			for _, g := range s.servers {
				g.GracefulStop()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			for _, g := range s.servers {
				g.Stop()
			}
			<-done
		}
		s.wg.Wait()
	})
	return err
}

// alloc is where the server builds its own batches (metadata answers).
var alloc memory.Allocator = memory.DefaultAllocator
