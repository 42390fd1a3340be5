package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves the status page at /, /metrics, /healthz (the process is
// alive) and /readyz (ready says why not, or "" when ready).
type Server struct {
	mux  *http.ServeMux
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Listen binds addr (host:port; port 0 picks one) and starts serving. The
// bind happens before Listen returns, so a taken port is reported at start.
func Listen(addr string, m *Metrics, status *Status, ready func() string, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", status.Handler(ready))
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := ready(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	s := &Server{
		mux:  mux,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return s, nil
}

// Handle serves h at pattern beside the status page (the GenAI report).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops serving, waiting for requests in progress until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}
