package tenancy

import "strings"

// Resolver decides the tenant of a request from the tenant the client
// sent (X-Scope-OrgID in HTTP, x-scope-orgid in gRPC metadata; "" for
// none) and the bearer token it showed ("" for none). Writes and reads
// ask the same Resolver, so they decide alike. Its methods are safe for
// concurrent use.
type Resolver struct {
	// Tokens, when set, require a token of the file on every request,
	// holding the tenant for what the request does.
	Tokens *Tokens
	// Default is the tenant of a request that names none
	// (tenancy.default), unless Required; not used for reads with
	// Tokens, where the token decides.
	Default string
	// Required refuses a request naming no tenant (tenancy.required).
	Required bool
}

// Messages shared by the refusals of writes and reads.
const (
	msgTenantRequired = "a tenant is required: send it in X-Scope-OrgID (HTTP) or x-scope-orgid (gRPC metadata)"
	msgTokenRequired  = "a valid bearer token is required"
)

// Write is the tenant a write acts for: the one sent, else Default
// unless Required. It must be a valid tenant id, and with Tokens the
// token must hold it for writing. The error is an *Error:
// Unauthenticated without a tenant where one is required, or without a
// token of the file; Invalid for a malformed tenant (checked before the
// token); Forbidden for a tenant the token may not write.
func (r Resolver) Write(sent, token string) (string, error) {
	t, ref := r.sentOrDefault(sent)
	if ref != nil {
		return "", ref
	}
	if err := CheckTenant(t); err != nil {
		return "", refuse(Invalid, "%s", err)
	}
	if r.Tokens != nil {
		g, ok := r.Tokens.Lookup(token)
		if !ok {
			return "", refuse(Unauthenticated, msgTokenRequired)
		}
		if !g.Write.Holds(t) {
			return "", refuse(Forbidden, "the token may not write tenant %s", t)
		}
	}
	return t, nil
}

// Read is whose rows a read sees. With Tokens: the token must be one of
// the file (else Unauthenticated); the tenant sent must be valid
// (Invalid) and one the token may read (Forbidden); without one sent, a
// token reading one tenant reads that one, a token reading any tenant (*)
// reads every tenant (Operator), one reading none is Forbidden, and one
// reading several is refused Unauthenticated, like a missing tenant under
// tenancy.required (and Mimir's 401 without X-Scope-OrgID): the client
// has not said whom it acts for, which is not malformed. Without Tokens:
// the tenant sent (Invalid if malformed), else Default unless Required
// (Unauthenticated). A tenant sent is never replaced by another, and
// only a token reading * that names none gives Operator: a tenant sent
// as * is the tenant named *, as in writes. Several tenants in Mimir's
// a|b form are Invalid: a read serves one. The error is an *Error.
func (r Resolver) Read(sent, token string) (Scope, error) {
	if r.Tokens == nil {
		t, ref := r.sentOrDefault(sent)
		if ref == nil {
			ref = checkReadTenant(t)
		}
		if ref != nil {
			return Scope{}, ref
		}
		return One(t), nil
	}
	g, ok := r.Tokens.Lookup(token)
	if !ok {
		return Scope{}, refuse(Unauthenticated, msgTokenRequired)
	}
	if sent != "" {
		if err := checkReadTenant(sent); err != nil {
			return Scope{}, err
		}
		if !g.Read.Holds(sent) {
			return Scope{}, refuse(Forbidden, "the token may not read tenant %s", sent)
		}
		return One(sent), nil
	}
	switch {
	case g.Read.Any:
		return Operator, nil
	case len(g.Read.List) == 1:
		return One(g.Read.List[0]), nil
	case len(g.Read.List) == 0:
		return Scope{}, refuse(Forbidden, "the token may not read any tenant")
	default:
		return Scope{}, refuse(Unauthenticated, "the token reads %d tenants: name one in X-Scope-OrgID (HTTP) or x-scope-orgid (gRPC metadata)", len(g.Read.List))
	}
}

// sentOrDefault is the tenant sent, else Default unless Required.
func (r Resolver) sentOrDefault(sent string) (string, *Error) {
	switch {
	case sent != "":
		return sent, nil
	case r.Required:
		return "", refuse(Unauthenticated, msgTenantRequired)
	default:
		return r.Default, nil
	}
}

// checkReadTenant is CheckTenant for a read, saying plainly that a read
// serves one tenant to a client sending Mimir's a|b.
func checkReadTenant(t string) *Error {
	if strings.Contains(t, "|") {
		return refuse(Invalid, "X-Scope-OrgID %q names several tenants: a read serves one", t)
	}
	if err := CheckTenant(t); err != nil {
		return refuse(Invalid, "%s", err)
	}
	return nil
}
