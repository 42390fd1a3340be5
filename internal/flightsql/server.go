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

// TenantsFunc adapts a function to Tenants.
type TenantsFunc func(sent, token string) (tenancy.Scope, error)

// Read calls f.
func (f TenantsFunc) Read(sent, token string) (tenancy.Scope, error) { return f(sent, token) }

// Options configure the server.
type Options struct {
	// Listen is the address served: host:port (port 0 picks one, see
	// Server.Addr), or unix:/path for a unix socket. "" serves none.
	Listen string
	// TLS, when set, serves Listen over TLS (mutual TLS when it asks for
	// client certificates). The local socket is never TLS.
	TLS *tls.Config
	// Socket is the path of the local socket offered to the commands of
	// the same host: created with mode 0600 (only the process's user may
	// connect), removed on Shutdown. A stale socket left by a process that
	// died is replaced; one another process still answers on is not. ""
	// serves none.
	Socket string
	// Reader answers the queries. Required.
	Reader query.Reader
	// Tenants resolves the callers of Listen. Required.
	Tenants Tenants
	// SocketTenants resolves the callers of the local socket, whom the
	// file mode already vouches for (typically: the operator's scope when
	// no tenant is named). Nil: Tenants.
	SocketTenants Tenants
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
	// was 0), or unix:/path; "" without Listen.
	Addr string
	// Socket is the path of the local socket; "" without one.
	Socket string

	log     *slog.Logger
	servers []*grpc.Server
	sockets []*unixSocket
	wg      sync.WaitGroup
	once    sync.Once
}

// Start listens and serves until Shutdown.
func Start(opt Options) (*Server, error) {
	if opt.Reader == nil || opt.Tenants == nil {
		return nil, errors.New("flightsql: Reader and Tenants are required")
	}
	if opt.Listen == "" && opt.Socket == "" {
		return nil, errors.New("flightsql: nothing to listen on (Listen and Socket both empty)")
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.SocketTenants == nil {
		opt.SocketTenants = opt.Tenants
	}
	h, err := newHandler(opt)
	if err != nil {
		return nil, err
	}
	s := &Server{log: opt.Log}
	if opt.Listen != "" {
		ln, addr, err := s.listen(opt.Listen)
		if err != nil {
			return nil, fmt.Errorf("flightsql: listen on %s: %w", opt.Listen, err)
		}
		var creds []grpc.ServerOption
		if opt.TLS != nil {
			creds = append(creds, grpc.Creds(credentials.NewTLS(opt.TLS.Clone())))
		}
		s.Addr = addr
		s.serve(ln, h, opt.Tenants, creds...)
	}
	if opt.Socket != "" {
		ln, err := listenUnix(opt.Socket)
		if err != nil {
			_ = s.Shutdown(context.Background())
			return nil, fmt.Errorf("flightsql: local socket %s: %w", opt.Socket, err)
		}
		s.sockets = append(s.sockets, ln)
		s.Socket = ln.path
		s.serve(ln, h, opt.SocketTenants)
	}
	opt.Log.Info("Flight SQL server listening", "addr", s.Addr, "socket", s.Socket, "tls", opt.TLS != nil)
	return s, nil
}

// listen opens addr: host:port, or unix:/path.
func (s *Server) listen(addr string) (net.Listener, string, error) {
	if path, ok := cutUnix(addr); ok {
		ln, err := listenUnix(path)
		if err != nil {
			return nil, "", err
		}
		s.sockets = append(s.sockets, ln)
		return ln, "unix:" + ln.path, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	return ln, ln.Addr().String(), nil
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
		for _, u := range s.sockets {
			u.remove()
		}
	})
	return err
}

// alloc is where the server builds its own batches (metadata answers).
var alloc memory.Allocator = memory.DefaultAllocator
