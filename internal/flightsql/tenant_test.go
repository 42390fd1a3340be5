package flightsql

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// The process resolves tenants with tenancy.Resolver.
var _ Tenants = tenancy.Resolver{}

// The tenant a call names reaches the Reader: each tenant sees its own
// rows, and the operator's token without a tenant sees every tenant's.
func TestTenantReachesTheReader(t *testing.T) {
	r := &fakeReader{}
	s := start(t, r)
	uri := "grpc+tcp://" + s.Addr
	for _, tc := range []struct {
		tenant, token string
		scope         tenancy.Scope
		first, last   string
	}{
		{"a", "tok-a", tenancy.One("a"), "a-0", "a-9"},
		{"b", "tok-b", tenancy.One("b"), "b-0", "b-9"},
		{"", "tok-op", tenancy.Operator, "a-0", "b-9"},
	} {
		got := runQuery(t, adbcConn(t, uri, tc.tenant, tc.token, nil), allSpans)
		if len(got.names) == 0 || got.names[0] != tc.first || got.names[len(got.names)-1] != tc.last {
			t.Errorf("%s: rows %v, want %s…%s", tc.scope, got.names, tc.first, tc.last)
		}
		calls := r.queries()
		if last := calls[len(calls)-1]; last.scope != tc.scope {
			t.Errorf("the Reader ran for %s, want %s", last.scope, tc.scope)
		}
	}
}

// A refusal of Tenants is the call's code, for queries and metadata
// alike, and nothing reaches the Reader.
func TestTenantRefusalsMapToCodes(t *testing.T) {
	r, _, c := setup(t)
	for _, tc := range []struct {
		name, tenant, token string
		code                codes.Code
	}{
		{"no token", "a", "", codes.Unauthenticated},
		{"unknown token", "a", "nope", codes.Unauthenticated},
		{"no tenant", "", "tok-a", codes.Unauthenticated},
		{"another tenant's token", "b", "tok-a", codes.PermissionDenied},
		{"malformed tenant", "a b", "tok-a", codes.InvalidArgument},
	} {
		ctx := as(tc.tenant, tc.token)
		_, err := c.Execute(ctx, allSpans)
		wantCode(t, tc.name+": Execute", err, tc.code)
		_, err = c.Prepare(ctx, allSpans)
		wantCode(t, tc.name+": Prepare", err, tc.code)
		_, err = c.GetTables(ctx, &afsql.GetTablesOpts{IncludeSchema: true})
		wantCode(t, tc.name+": GetTables", err, tc.code)
		_, err = c.GetSqlInfo(ctx, []afsql.SqlInfo{afsql.SqlInfoFlightSqlServerName})
		wantCode(t, tc.name+": GetSqlInfo", err, tc.code)
	}
	if n := len(r.queries()); n != 0 {
		t.Errorf("%d queries reached the Reader", n)
	}
}

// Through ADBC the same refusals read as ADBC's codes.
func TestTenantRefusalThroughADBC(t *testing.T) {
	_, s, _ := setup(t)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "b", "tok-a", nil)
	st := statement(t, c, allSpans)
	_, _, err := st.ExecuteQuery(context.Background())
	var ae adbc.Error
	if !errors.As(err, &ae) || ae.Code != adbc.StatusUnauthorized {
		t.Errorf("tenant b with tenant a's token: %v, want StatusUnauthorized", err)
	}
}

// A ticket issued to tenant A, replayed with tenant B's credentials, is
// refused and gives none of A's rows; the query never runs for B. The
// same for a prepared statement's handle, bound or not.
func TestTicketOfAnotherTenantIsRefused(t *testing.T) {
	r, _, c := setup(t)
	ctxA, ctxB := as("a", "tok-a"), as("b", "tok-b")

	info, err := c.Execute(ctxA, allSpans)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch(ctxB, t, c, info)
	wantCode(t, "A's ticket with B's credentials", err, codes.PermissionDenied)
	if len(got.names) != 0 {
		t.Errorf("B got rows %v with A's ticket", got.names)
	}
	// The operator, who may read A, is refused too: a ticket is its
	// issuer's alone.
	_, err = fetch(as("", "tok-op"), t, c, info)
	wantCode(t, "A's ticket with the operator's credentials", err, codes.PermissionDenied)
	// A itself can run it again.
	if got, err := fetch(ctxA, t, c, info); err != nil || len(got.names) != spanRows {
		t.Errorf("A's ticket with A's credentials: %d rows, %v", len(got.names), err)
	}

	prep, err := c.Prepare(ctxA, spansFrom)
	if err != nil {
		t.Fatal(err)
	}
	params := int64Batch(5)
	defer params.Release()
	prep.SetParameters(params)
	info, err = prep.Execute(ctxA) // binds, then GetFlightInfo with the bound handle
	if err != nil {
		t.Fatal(err)
	}
	got, err = fetch(ctxB, t, c, info)
	wantCode(t, "A's bound prepared statement with B's credentials", err, codes.PermissionDenied)
	if len(got.names) != 0 {
		t.Errorf("B got rows %v with A's prepared statement", got.names)
	}
	_, err = prep.Execute(ctxB)
	wantCode(t, "A's prepared statement bound by B", err, codes.PermissionDenied)
	if err := prep.Close(ctxA); err != nil {
		t.Error(err)
	}

	for _, call := range r.queries() {
		if call.scope != tenancy.One("a") {
			t.Errorf("a query ran for %s", call.scope)
		}
	}
	r.released(t)
}

// The tables listed are those of the caller's scope, resolved at DoGet:
// a GetTables ticket replayed by a tenant lists the tenant's tables, not
// the operator's who asked for it.
func TestTablesAreTheCallers(t *testing.T) {
	r, _, c := setup(t)
	info, err := c.GetTables(as("", "tok-op"), &afsql.GetTablesOpts{})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ctx context.Context) []string { return fetchColumn(ctx, t, c, info, 2) }
	if got := names(as("", "tok-op")); !slices.Equal(got, []string{"positions", "spans"}) {
		t.Errorf("operator's tables %v", got)
	}
	if got := names(as("a", "tok-a")); !slices.Equal(got, []string{"spans"}) {
		t.Errorf("tenant a's tables %v, want spans alone", got)
	}
	if scopes := r.tableScopes(); scopes[len(scopes)-1] != tenancy.One("a") {
		t.Errorf("Tables asked for %v", scopes)
	}
}

// A call naming several tenants (x-scope-orgid with two values) is
// refused, never read as the first: dskit's gRPC middleware, which Loki,
// Tempo and Mimir use, refuses several values too (user/grpc.go,
// ExtractFromGRPCRequest), and the OTLP receivers refuse them alike. An
// x-scope-orgid sent empty is a malformed tenant, not a call naming none
// (which, with the operator's token, reads every tenant). Nothing
// reaches the Reader.
func TestSeveralOrEmptyTenantsRefused(t *testing.T) {
	r, _, c := setup(t)
	for name, kv := range map[string][]string{
		"two tenants":   {"x-scope-orgid", "a", "x-scope-orgid", "b"},
		"one twice":     {"x-scope-orgid", "a", "x-scope-orgid", "a"},
		"empty":         {"x-scope-orgid", ""},
		"blank":         {"x-scope-orgid", "  "},
		"empty, then a": {"x-scope-orgid", "", "x-scope-orgid", "a"},
	} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), append(kv, "authorization", "Bearer tok-op")...)
		_, err := c.Execute(ctx, allSpans)
		wantCode(t, name+": Execute", err, codes.InvalidArgument)
		_, err = c.GetTables(ctx, &afsql.GetTablesOpts{})
		wantCode(t, name+": GetTables", err, codes.InvalidArgument)
	}
	if calls := r.queries(); len(calls) != 0 {
		t.Errorf("%d queries reached the Reader, the first for %s", len(calls), calls[0].scope)
	}
}
