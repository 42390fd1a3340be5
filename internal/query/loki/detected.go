package loki

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// staticLabels are kept by detected_labels whatever their values (Loki
// pkg/querier/querier.go DetectedLabels).
var staticLabels = []string{"cluster", "namespace", "instance", "pod"}

// detectedLabels answers /loki/api/v1/detected_labels, which Grafana's
// Logs Drilldown asks for the labels to break streams down by: each
// stream label with its number of distinct values, leaving out those
// whose values all look like ids (numbers or UUIDs; Loki
// shouldRejectLabel, containsAllIDTypes). Loki estimates cardinality with
// a sketch; it is exact here.
func (a *api) detectedLabels(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	values := map[string]map[string]bool{}
	for _, s := range ss {
		for _, l := range s.labels {
			if values[l.Name] == nil {
				values[l.Name] = map[string]bool{}
			}
			values[l.Name][l.Value] = true
		}
	}
	b := []byte(`{"detectedLabels":[`)
	n := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range values {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(staticLabels, name) && rejectLabel(values[name]) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"label":`...)
		b = appendString(b, name)
		b = fmt.Appendf(b, `,"cardinality":%d}`, len(values[name]))
		n++
	}
	writeJSON(w, append(b, "]}"...))
}

// rejectLabel says whether a label's values are ids, not categories: no
// values, or every value a number or a UUID (0 and 1 alone are
// booleans, kept).
func rejectLabel(values map[string]bool) bool {
	if len(values) == 0 {
		return true
	}
	boolean := len(values) <= 2
	for v := range values {
		if v != "0" && v != "1" {
			boolean = false
		}
	}
	if boolean {
		return false
	}
	for v := range values {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			if _, err := uuid.Parse(v); err != nil {
				return false
			}
		}
	}
	return true
}
