package flightsql

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// readOnly is the refusal of every write, DDL, ingestion and transaction.
var readOnly = grpcstatus.Error(codes.PermissionDenied,
	"tracelake's Flight SQL server is read-only: updates, ingestion, Substrait plans and transactions are refused")

// status is err as the gRPC status the client gets:
//   - a *tenancy.Error by its kind: Unauthenticated, PermissionDenied,
//     InvalidArgument;
//   - a *query.RefusedError: InvalidArgument (the caller's query);
//   - a cancelled or timed-out call: Canceled, DeadlineExceeded;
//   - a status already made here: itself;
//   - anything else: Internal, with its message stripped of file paths
//     (the engine's errors may name the files it reads; the log keeps
//     them whole).
func status(err error) error {
	if err == nil {
		return nil
	}
	var te *tenancy.Error
	if errors.As(err, &te) {
		code := codes.Unauthenticated
		switch te.Kind {
		case tenancy.Forbidden:
			code = codes.PermissionDenied
		case tenancy.Invalid:
			code = codes.InvalidArgument
		}
		return grpcstatus.Error(code, te.Msg)
	}
	var re *query.RefusedError
	if errors.As(err, &re) {
		return grpcstatus.Error(codes.InvalidArgument, re.Error())
	}
	switch {
	case errors.Is(err, context.Canceled):
		return grpcstatus.Error(codes.Canceled, "the call was cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return grpcstatus.Error(codes.DeadlineExceeded, "the call's deadline passed")
	}
	if st, ok := grpcstatus.FromError(err); ok && st.Code() != codes.Unknown {
		return err
	}
	return grpcstatus.Error(codes.Internal, query.StripPaths(err.Error()))
}
