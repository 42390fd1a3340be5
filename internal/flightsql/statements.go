package flightsql

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// Statements: GetFlightInfo hands out a ticket carrying the scope and the
// SQL; DoGet runs it. The query is not planned at GetFlightInfo (the
// FlightInfo carries no schema), so it is planned once, and a refused
// query is refused at DoGet with the same code. Clients that want the
// schema first ask GetSchema, or prepare.

func (h *handler) GetFlightInfoStatement(ctx context.Context, cmd afsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	sc, err := h.scope(ctx)
	if err != nil {
		return nil, err
	}
	if len(cmd.GetTransactionId()) > 0 {
		return nil, readOnly
	}
	tkt, err := afsql.CreateStatementQueryTicket(handle{scope: sc, sql: cmd.GetQuery()}.encode())
	if err != nil {
		return nil, h.fail(ctx, "GetFlightInfoStatement", err)
	}
	return flightInfo(desc, tkt, nil), nil
}

func (h *handler) GetSchemaStatement(ctx context.Context, cmd afsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	sc, err := h.scope(ctx)
	if err != nil {
		return nil, err
	}
	if len(cmd.GetTransactionId()) > 0 {
		return nil, readOnly
	}
	return h.schema(ctx, "GetSchemaStatement", sc, cmd.GetQuery())
}

// schema answers a GetSchema: the Reader's schema of sql, not run.
func (h *handler) schema(ctx context.Context, what string, sc tenancy.Scope, sql string) (*flight.SchemaResult, error) {
	s, err := h.reader.Schema(ctx, sc, sql)
	if err != nil {
		return nil, h.fail(ctx, what, err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(s, alloc)}, nil
}

func (h *handler) DoGetStatement(ctx context.Context, cmd afsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	hd, err := h.handleFor(ctx, cmd.GetStatementHandle())
	if err != nil {
		return nil, nil, err
	}
	return h.run(ctx, "DoGetStatement", hd)
}

// Prepared statements: the handle carries the scope and the SQL, and
// after DoPut the bound parameters too; the DoPut answers a new handle
// with them (Flight SQL's stateless prepared statements: arrow-go, ADBC,
// and the Java client and JDBC driver since Arrow 15 use it).

func (h *handler) CreatePreparedStatement(ctx context.Context, req afsql.ActionCreatePreparedStatementRequest) (afsql.ActionCreatePreparedStatementResult, error) {
	var res afsql.ActionCreatePreparedStatementResult
	sc, err := h.scope(ctx)
	if err != nil {
		return res, err
	}
	if len(req.GetTransactionId()) > 0 {
		return res, readOnly
	}
	// Planned now: JDBC describes the result from it before running, and
	// a query the Reader refuses is refused when prepared.
	if res.DatasetSchema, err = h.reader.Schema(ctx, sc, req.GetQuery()); err != nil {
		return res, h.fail(ctx, "CreatePreparedStatement", err)
	}
	if p, ok := h.reader.(Parameters); ok {
		if res.ParameterSchema, err = p.Parameters(ctx, sc, req.GetQuery()); err != nil {
			return res, h.fail(ctx, "CreatePreparedStatement", err)
		}
	}
	res.Handle = handle{scope: sc, sql: req.GetQuery()}.encode()
	return res, nil
}

// ClosePreparedStatement has nothing to free: the handle holds it all.
func (h *handler) ClosePreparedStatement(ctx context.Context, req afsql.ActionClosePreparedStatementRequest) error {
	_, err := decodeHandle(req.GetPreparedStatementHandle())
	return err
}

func (h *handler) DoPutPreparedStatementQuery(ctx context.Context, cmd afsql.PreparedStatementQuery, rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	hd, err := h.handleFor(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	if hd.params, err = bindParams(rdr); err != nil {
		return nil, h.fail(ctx, "DoPutPreparedStatementQuery", err)
	}
	return hd.encode(), nil
}

func (h *handler) GetFlightInfoPreparedStatement(ctx context.Context, cmd afsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if _, err := h.handleFor(ctx, cmd.GetPreparedStatementHandle()); err != nil {
		return nil, err
	}
	// The command itself is the ticket: DoGet routes it to
	// DoGetPreparedStatement.
	return flightInfo(desc, desc.GetCmd(), nil), nil
}

func (h *handler) GetSchemaPreparedStatement(ctx context.Context, cmd afsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	hd, err := h.handleFor(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	return h.schema(ctx, "GetSchemaPreparedStatement", hd.scope, hd.sql)
}

func (h *handler) DoGetPreparedStatement(ctx context.Context, cmd afsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	hd, err := h.handleFor(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, nil, err
	}
	return h.run(ctx, "DoGetPreparedStatement", hd)
}

// handleFor decodes a handle and refuses it unless it was issued for the
// caller's scope (see handle); it runs under the caller's scope.
func (h *handler) handleFor(ctx context.Context, b []byte) (handle, error) {
	sc, err := h.scope(ctx)
	if err != nil {
		return handle{}, err
	}
	hd, err := decodeHandle(b)
	if err != nil {
		return handle{}, err
	}
	if err := hd.check(sc); err != nil {
		// Worth a look: a ticket reached a client it was not issued to.
		h.log.Warn("Flight SQL handle of another scope refused", "scope", sc.String())
		return handle{}, err
	}
	hd.scope = sc // the same; what runs is the caller's, whatever check takes
	return hd, nil
}
