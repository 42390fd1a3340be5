package flightsql

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Parameters is what a Reader may also do: say which parameters sql takes,
// one field per placeholder in order, with the type it expects. When the
// Reader does, a prepared statement reports them, which JDBC needs to
// bind a parameter at all, and the database/sql adapter to bind a
// time.Time; otherwise it reports none and clients bind what they have.
type Parameters interface {
	Parameters(ctx context.Context, s tenancy.Scope, sql string) (*arrow.Schema, error)
}

// handler answers the Flight SQL calls (routed to it by arrow-go's
// flightsql.NewFlightServer); calls it does not override are answered
// Unimplemented by the embedded BaseServer.
type handler struct {
	afsql.BaseServer
	reader            query.Reader
	catalog, dbSchema string
	log               *slog.Logger
}

func newHandler(opt Options) (*handler, error) {
	h := &handler{reader: opt.Reader, catalog: opt.Catalog, dbSchema: opt.DBSchema, log: opt.Log}
	if h.catalog == "" {
		h.catalog = "tracelake"
	}
	if h.dbSchema == "" {
		h.dbSchema = "main"
	}
	h.Alloc = alloc
	version := opt.Version
	if version == "" {
		version = "dev"
	}
	if err := registerSQLInfo(&h.BaseServer, version); err != nil {
		return nil, fmt.Errorf("flightsql: %w", err)
	}
	return h, nil
}

func newFlightServer(h *handler) flight.FlightServer {
	return afsql.NewFlightServerWithAllocator(h, alloc)
}

// scope is the caller's scope, resolved by the interceptors.
func (h *handler) scope(ctx context.Context) (tenancy.Scope, error) {
	sc, ok := scopeOf(ctx)
	if !ok {
		// Every server Start makes resolves the scope first.
		return tenancy.Scope{}, grpcstatus.Error(codes.Internal, "BUG: a call reached the handler without a scope")
	}
	return sc, nil
}

// fail is err as the client gets it; the server's own errors are logged
// whole, since the client gets them without their paths.
func (h *handler) fail(ctx context.Context, what string, err error) error {
	st := status(err)
	if grpcstatus.Code(st) == codes.Internal {
		sc, _ := scopeOf(ctx)
		h.log.Error("Flight SQL call failed", "call", what, "scope", sc.String(), "err", err)
	}
	return st
}

// flightInfo is the answer of a GetFlightInfo whose result is fetched
// with a ticket: one endpoint, on this server.
func flightInfo(desc *flight.FlightDescriptor, ticket []byte, schema *arrow.Schema) *flight.FlightInfo {
	fi := &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: ticket}}},
		FlightDescriptor: desc,
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
	if schema != nil {
		fi.Schema = flight.SerializeSchema(schema, alloc)
	}
	return fi
}
