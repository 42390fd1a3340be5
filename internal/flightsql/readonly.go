package flightsql

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
)

// The server only reads: every call that writes, or opens a transaction
// to write in, is refused with PermissionDenied (readOnly), after the
// caller's scope was resolved (a caller Tenants refuses gets that refusal
// first). GetSqlInfo says so too (read-only, no transactions), so clients
// that look do not try.

func (h *handler) DoPutCommandStatementUpdate(context.Context, afsql.StatementUpdate) (int64, error) {
	return 0, readOnly
}

func (h *handler) DoPutCommandSubstraitPlan(context.Context, afsql.StatementSubstraitPlan) (int64, error) {
	return 0, readOnly
}

// Substrait plans are not taken at all, queries included: the read path
// checks SQL text, and a plan would bypass it.

func (h *handler) GetFlightInfoSubstraitPlan(context.Context, afsql.StatementSubstraitPlan, *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return nil, readOnly
}

func (h *handler) GetSchemaSubstraitPlan(context.Context, afsql.StatementSubstraitPlan, *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	return nil, readOnly
}

func (h *handler) PollFlightInfoSubstraitPlan(context.Context, afsql.StatementSubstraitPlan, *flight.FlightDescriptor) (*flight.PollInfo, error) {
	return nil, readOnly
}

func (h *handler) CreatePreparedSubstraitPlan(context.Context, afsql.ActionCreatePreparedSubstraitPlanRequest) (afsql.ActionCreatePreparedStatementResult, error) {
	return afsql.ActionCreatePreparedStatementResult{}, readOnly
}

func (h *handler) DoPutPreparedStatementUpdate(context.Context, afsql.PreparedStatementUpdate, flight.MessageReader) (int64, error) {
	return 0, readOnly
}

func (h *handler) DoPutCommandStatementIngest(context.Context, afsql.StatementIngest, flight.MessageReader) (int64, error) {
	return 0, readOnly
}

func (h *handler) BeginTransaction(context.Context, afsql.ActionBeginTransactionRequest) ([]byte, error) {
	return nil, readOnly
}

func (h *handler) EndTransaction(context.Context, afsql.ActionEndTransactionRequest) error {
	return readOnly
}

func (h *handler) BeginSavepoint(context.Context, afsql.ActionBeginSavepointRequest) ([]byte, error) {
	return nil, readOnly
}

func (h *handler) EndSavepoint(context.Context, afsql.ActionEndSavepointRequest) error {
	return readOnly
}
