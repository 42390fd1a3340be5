package tempo

import (
	"net/http"

	"github.com/tracelake/tracelake/internal/tenancy"
)

func (s *server) queryRange(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	s.routes.Fail(w, http.StatusNotImplemented, "not yet")
}
