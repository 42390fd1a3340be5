package flightsql

import (
	"encoding/binary"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A handle is what a statement ticket or a prepared statement handle
// carries: everything needed to run the query again — the scope it was
// issued for, the SQL, and the bound parameters — so the server keeps no
// state between calls: a ticket works on any replica and after a restart,
// and a prepared statement left open by a client holds nothing.
//
// Safety does not rest on the handle being secret or unforged. Every call
// resolves its own scope from its own metadata; a handle is refused when
// the scope it carries differs from the caller's, and the query then runs
// under the caller's scope, never the handle's. So a ticket of tenant A
// replayed with tenant B's credentials is refused, and a handle edited to
// name another tenant is refused too, or runs as its caller (who could
// send that SQL anyway). Refusing, rather than silently running under the
// caller's scope, turns a ticket handed to the wrong client into an error
// instead of a different answer. The parameters a handle carries are a
// caller's bytes too: checked before arrow-go reads them (paramRows).
type handle struct {
	scope  tenancy.Scope
	sql    string
	params []byte // Arrow IPC stream of the bound parameters; nil: none
}

const handleVersion = 1

// maxParamBytes bounds the bound parameters a handle carries (it travels
// in every call that runs the statement).
const maxParamBytes = 1 << 20

func (h handle) encode() []byte {
	b := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(h.scope.Tenant)+len(h.sql)+len(h.params))
	b = append(b, handleVersion)
	var flags byte
	if h.scope.All {
		flags |= 1
	}
	b = append(b, flags)
	b = appendBytes(b, []byte(h.scope.Tenant))
	b = appendBytes(b, []byte(h.sql))
	return appendBytes(b, h.params)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errBadHandle = grpcstatus.Error(codes.InvalidArgument, "not a statement handle or ticket of this server")

func decodeHandle(b []byte) (handle, error) {
	if len(b) < 2 || b[0] != handleVersion || b[1]&^1 != 0 {
		return handle{}, errBadHandle
	}
	h := handle{scope: tenancy.Scope{All: b[1]&1 != 0}}
	b = b[2:]
	var fields [3][]byte
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return handle{}, errBadHandle
		}
		fields[i], b = b[k:k+int(n)], b[k+int(n):]
	}
	if len(b) != 0 {
		return handle{}, errBadHandle
	}
	h.scope.Tenant, h.sql = string(fields[0]), string(fields[1])
	if len(fields[2]) > 0 {
		h.params = fields[2]
	}
	return h, nil
}

// errOtherScope refuses a handle issued for another scope; it does not
// say whose, which would tell one tenant another's name.
var errOtherScope = grpcstatus.Error(codes.PermissionDenied,
	"the ticket or statement handle was issued for another tenant: prepare or run the statement again with your own credentials")

// check refuses a handle issued for a scope other than the caller's.
func (h handle) check(caller tenancy.Scope) error {
	if h.scope != caller {
		return errOtherScope
	}
	return nil
}
