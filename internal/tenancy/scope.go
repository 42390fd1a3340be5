// Package tenancy decides which tenant a request acts for, the same way
// for writes (the OTLP receivers) and reads (the query endpoints): from
// the bearer token a client shows (a tokens file says which tenants each
// token may write and read) and the tenant it names (X-Scope-OrgID).
package tenancy

import "fmt"

// Scope is whose rows a read sees: one tenant's, or every tenant's (the
// operator's, on the local socket or with a token that may read any
// tenant and names none).
type Scope struct {
	Tenant string // the tenant; "" when All
	All    bool
}

// One is the scope of tenant t alone.
func One(t string) Scope { return Scope{Tenant: t} }

// Operator is the scope of every tenant.
var Operator = Scope{All: true}

func (s Scope) String() string {
	if s.All {
		return "all tenants"
	}
	return "tenant " + s.Tenant
}

// Kind is what a refusal means, so that each protocol answers it with
// its own code (HTTP status, gRPC code).
type Kind int

const (
	// Unauthenticated: no token, or one the file does not hold (401,
	// Unauthenticated); also no tenant where one is required.
	Unauthenticated Kind = iota
	// Forbidden: the token may not act for that tenant (403,
	// PermissionDenied).
	Forbidden
	// Invalid: a malformed tenant id (400, InvalidArgument).
	Invalid
)

// Error is a refusal, with what it means and the message for the client.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func refuse(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}
