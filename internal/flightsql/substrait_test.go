package flightsql

import (
	"testing"

	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
)

// TestSubstraitPlansRefusedPermissionDenied: README "Reading while it
// loads", Read-only: "Flight SQL's other DoPuts, updates, Substrait plans
// and transactions are refused as PermissionDenied" (and the package doc:
// "Updates, ingestion, transactions and Substrait plans are refused
// (PermissionDenied)"). A Substrait query, its schema, its poll and a
// prepared Substrait plan are Substrait plans too.
func TestSubstraitPlansRefusedPermissionDenied(t *testing.T) {
	r, _, c := setup(t)
	ctx := as("a", "tok-a")
	plan := afsql.SubstraitPlan{Plan: []byte{1}, Version: "0.1"}

	_, err := c.ExecuteSubstrait(ctx, plan)
	wantCode(t, "ExecuteSubstrait (GetFlightInfo)", err, codes.PermissionDenied)
	_, err = c.GetExecuteSubstraitSchema(ctx, plan)
	wantCode(t, "GetExecuteSubstraitSchema (GetSchema)", err, codes.PermissionDenied)
	_, err = c.ExecuteSubstraitPoll(ctx, plan, nil)
	wantCode(t, "ExecuteSubstraitPoll (PollFlightInfo)", err, codes.PermissionDenied)
	_, err = c.PrepareSubstrait(ctx, plan)
	wantCode(t, "PrepareSubstrait (DoAction CreatePreparedSubstraitPlan)", err, codes.PermissionDenied)
	if q := r.queries(); len(q) != 0 {
		t.Errorf("the Reader ran %d queries", len(q))
	}
}
