package prom

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// The SQL this package sends down the read path. The read path scopes
// every table to the caller's tenant itself (query.Reader); the queries
// name the table unqualified and carry every value as a parameter.

// servedWhere picks the rows served: exponential histograms (which
// would be native histograms) are not; sums and histograms only of
// cumulative temporality, as Prometheus's OTLP receiver stores them by
// default (metrics_to_prw.go FromMetrics refuses any other, unspecified
// included: "invalid temporality and type combination"). PromQL's rate()
// and increase() would read deltas as resets. Written as one IN list
// and a condition beside it, which DuckDB pushes into the scan (an OR
// of the two kinds at the top cost BenchmarkRate6h a tenth more CPU).
const servedWhere = `metric_type IN ('gauge', 'sum', 'histogram', 'summary') AND (temporality = 'cumulative' OR metric_type IN ('gauge', 'summary'))`

// timeRange bounds a query in milliseconds, clamped to what a timestamp
// in microseconds holds (Prometheus's API sends its MinTime and MaxTime
// for "unbounded"): from mint's first microsecond through maxt's last, as
// a point's sample is at its time truncated to the millisecond.
func timeRange(mint, maxt int64) (from, to int64) {
	const lo, hi = 0, 253402300799999 // 1970 to the end of year 9999
	return min(max(mint, lo), hi) * 1000, min(max(maxt, lo), hi)*1000 + 999
}

// familiesSQL lists the families with points in a time range ($1, $2:
// microseconds): metric_name, metric_unit, metric_type and is_monotonic
// as the table holds them, so a null unit and an empty one are two rows
// (as are a null and a false is_monotonic), which allFamilies makes one;
// then whether no point has a sum, and whether none has quantiles (the
// family's kinds); with described, then the family's greatest
// description. The columns
// are grouped as they are: coalescing each point's cost a third of the
// query, and the description's max another third, on BenchmarkRate6h's
// 500k points; only the metadata endpoint answers descriptions.
func familiesSQL(table string, described bool) string {
	desc := ""
	if described {
		desc = ", max(metric_description)"
	}
	return `SELECT metric_name, metric_unit, metric_type, is_monotonic, count("sum") FILTER (WHERE metric_type = 'histogram') = 0, coalesce(max(json_array_length(quantiles)) FILTER (WHERE metric_type = 'summary'), 0) = 0` + desc + `
		FROM ` + sqltext.Ident(table) + `
		WHERE time >= make_timestamp($1) AND time <= make_timestamp($2) AND metric_name IS NOT NULL AND ` + servedWhere + `
		GROUP BY metric_name, metric_unit, metric_type, is_monotonic`
}

// seriesFilter is what a series query pushes down beside the time range:
// the families wanted, and the values the service_name label must have;
// distributions says whether any of the families is a histogram or a
// summary.
type seriesFilter struct {
	families      []*family
	services      []string
	distributions bool
}

// seriesSQL reads the distinct series of the families f names in a time
// range ($1, $2: microseconds), one row per series: the family (null
// when f names one: the rows are all of it), its scope (name, version,
// attributes), its resource's and point's attributes
// as JSON text, and the tenant for a scope reading every tenant (columns
// colName to colTenant). With points, the columns from colT on are lists
// of the series's points, one list per field, in no order: time (ms),
// value, count, sum, bucket counts, bounds and quantiles (JSON text);
// then the times of the points flagged as having no recorded value
// (stale markers), a list most often empty: a list of every point's
// flags cost a sixth of the query. Without, colShapes lists the distinct
// bounds of a histogram or quantiles of a summary (JSON lists), for the
// series names their buckets make, and colNoSum says whether no point
// has a sum (a histogram's optional sum: no _sum series). It returns the query's parameters.
//
// The points are not sorted nor made distinct here: ordering the lists
// or dropping the exact duplicates a client's retry loads (grouping by
// series and time) tripled the query's time on the benchmark's million
// points (BenchmarkRate6h), so readRowPoints orders them (merging the
// sorted runs DuckDB's threads leave) and keeps one per timestamp, which
// is what drops a duplicate by its natural key.
//
// The series are grouped by the columns as they are, not coalesced, and
// by the family only when f names several: DuckDB's grouping costs by
// the column, and coalescing each point's columns and grouping by four
// columns that one family holds constant were a third of the query on
// the benchmark's 500k points. Rows of a null and an empty column (scope
// version, attributes) come apart, and are one series again in read
// (mergeSame), as are any two rows of the same labels.
func seriesSQL(table string, all, points bool, from, to int64, f seriesFilter) (string, []any) {
	group := []string{"scope_name", "scope_version", "scope_attributes", "resource_attributes", "attributes"}
	family := "NULL::VARCHAR, NULL::VARCHAR, NULL::VARCHAR, NULL::BOOLEAN"
	if len(f.families) > 1 {
		family = "metric_name, metric_unit, metric_type, is_monotonic"
		group = append(group, family)
	}
	noSum := "true"
	if f.distributions {
		noSum = `count("sum") = 0`
	}
	tenant := "''"
	if all {
		tenant = "tenant_id"
		group = append(group, tenant)
	}
	last := `list(DISTINCT coalesce(` + countedBounds + `, json_extract(quantiles, '$[*].quantile')::VARCHAR)), ` + noSum
	if points {
		// Gauges and sums have no distribution: their rows' lists of
		// counts, sums, bucket counts, bounds and quantiles are left
		// unread (null).
		dist := `list("count"), list("sum"), list(bucket_counts::VARCHAR), list(explicit_bounds::VARCHAR), list(quantiles::VARCHAR)`
		if !f.distributions {
			dist = `NULL::BIGINT[], NULL::DOUBLE[], NULL::VARCHAR[], NULL::VARCHAR[], NULL::VARCHAR[]`
		}
		last = `list(epoch_ms(time)), list(value), ` + dist + `, list(epoch_ms(time)) FILTER (WHERE flags & ` + strconv.Itoa(noRecordedValue) + ` <> 0)`
	}
	params := []any{from, to}
	var names []string
	for _, fam := range f.families {
		if !slices.Contains(names, fam.name) {
			names = append(names, fam.name)
		}
	}
	var where strings.Builder
	where.WriteString(`time >= make_timestamp($1) AND time <= make_timestamp($2) AND ` + servedWhere)
	// The names first, a filter the scan applies; then each family's
	// unit, type and monotonicity.
	where.WriteString(" AND metric_name IN (" + placeholders(&params, names) + ") AND (")
	for i, fam := range f.families {
		if i > 0 {
			where.WriteString(" OR ")
		}
		where.WriteString("(metric_name = " + placeholders(&params, []string{fam.name}))
		if fam.unit == "" {
			where.WriteString(" AND (metric_unit IS NULL OR metric_unit = '')")
		} else {
			where.WriteString(" AND metric_unit = " + placeholders(&params, []string{fam.unit}))
		}
		where.WriteString(" AND metric_type = " + placeholders(&params, []string{fam.typ}))
		if fam.monotonic {
			where.WriteString(" AND is_monotonic)")
		} else {
			where.WriteString(" AND (is_monotonic IS NULL OR NOT is_monotonic))")
		}
	}
	where.WriteString(")")
	if len(f.services) > 0 {
		// The column is the resource's service.name; the label may come
		// from elsewhere: a point attribute, which wins over the
		// resource's, whose key holds "service" and "name" to escape to
		// service_name; or another resource attribute escaping to
		// service_name (service_name, service-name: "service", one
		// character that escapes to _, "name"), which wins over
		// service.name when later in the resource (metrics_to_prw.go
		// addPromotedAttributes), or when the resource has no
		// service.name (the column is ''). Such resources are rare, and
		// their rows are read whatever the column says; a LIKE first
		// spares most rows the regular expression.
		where.WriteString(" AND (coalesce(service_name, '') IN ('', " + placeholders(&params, f.services) +
			") OR attributes::VARCHAR LIKE '%service%name%' OR resource_attributes::VARCHAR LIKE '%service%name%' AND regexp_matches(resource_attributes::VARCHAR, '" + otherServiceNameKey + "'))")
	}
	return `SELECT ` + family + `, scope_name, scope_version, scope_attributes::VARCHAR, resource_attributes::VARCHAR, attributes::VARCHAR, ` + tenant + `, ` + last + `
		FROM ` + sqltext.Ident(table) + `
		WHERE ` + where.String() + `
		GROUP BY ` + strings.Join(group, ", "), params
}

// countedBounds is the SQL of a histogram point's bounds that have a
// bucket count, as JSON text: Prometheus's OTLP receiver makes the
// series of a bound only when the point has its count
// (prometheusremotewrite/helper.go addHistogramDataPoints: `i <
// ExplicitBounds().Len() && i < BucketCounts().Len()`), and a sender may
// send fewer counts than bounds, or none. NULL for a point of no bounds
// (a summary).
const countedBounds = `CASE WHEN json_array_length(bucket_counts) >= json_array_length(explicit_bounds) THEN explicit_bounds::VARCHAR
	ELSE list_slice(json_extract(explicit_bounds, '$[*]'), 1, json_array_length(bucket_counts))::VARCHAR END`

// otherServiceNameKey finds, in a JSON object's text, a key other than
// service.name that escapes to the label service_name: "service", one
// character that is no letter, digit or dot (as is, or escaped by JSON:
// \", \\, \uXXXX), "name".
const otherServiceNameKey = `"service([^.a-zA-Z0-9\\"]|\\.|\\u[0-9a-fA-F]{4})name"`

// The columns of seriesSQL's rows.
const (
	colName = iota
	colUnit
	colType
	colMonotonic
	colScopeName
	colScopeVersion
	colScopeAttributes
	colResource
	colAttributes
	colTenant
	colShapes             // without points
	colNoSum              // without points
	colT      = colShapes // with points: the lists, one per field
)

// placeholders appends vs to params and returns their placeholders.
func placeholders(params *[]any, vs []string) string {
	ph := make([]string, len(vs))
	for i, v := range vs {
		*params = append(*params, v)
		ph[i] = fmt.Sprintf("$%d", len(*params))
	}
	return strings.Join(ph, ", ")
}

// readRows runs q for scope and hands each batch to f, which must copy
// what it keeps: the batch's memory is freed after.
func readRows(ctx context.Context, r query.Reader, scope tenancy.Scope, q string, params []any, f func(arrow.RecordBatch) error) error {
	rr, err := r.Query(ctx, scope, q, params...)
	if err != nil {
		return &readError{err}
	}
	defer rr.Release()
	for rr.Next() {
		if err := f(rr.RecordBatch()); err != nil {
			return &readError{err}
		}
	}
	if err := rr.Err(); err != nil {
		return &readError{err}
	}
	return nil
}

// readError is a failure of the read path under the API's storage (the
// reader's query, its scans, the rows it gave): the server's, whose
// message may name the files it reads (writer.fail). PromQL answers it
// inside an execution error ("expanding series: ..."), beside its own
// evaluation errors, which quote the query and its series' labels.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// stringAt is the string at row i of a string column of any of Arrow's
// layouts, copied; "" for null.
func stringAt(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return ""
	}
	switch c := a.(type) {
	case *array.String:
		return strings.Clone(c.Value(i))
	case *array.LargeString:
		return strings.Clone(c.Value(i))
	case *array.StringView:
		return strings.Clone(c.Value(i))
	}
	return a.ValueStr(i)
}

func boolAt(a arrow.Array, i int) bool {
	c, ok := a.(*array.Boolean)
	return ok && !a.IsNull(i) && c.Value(i)
}
