package loki

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// The SQL of a read: the tenant's rows are the reader's business (its
// views), so none of it names a tenant but an operator's read of every
// tenant, which reads each row's tenant_id for its stream's tenantLabel.

// tsSQL is a record's time in Unix ns: the exact column, else the
// microsecond one (rows loaded before time_unix_nano existed). A record
// without a time has its observed time (as Loki stores it,
// pkg/loghttp/push/otlp.go timestampFromLogRecord), exact likewise
// (observed_time_unix_nano).
const (
	tsSQL         = `coalesce(nullif(time_unix_nano, 0), epoch_us("time") * 1000)`
	tsObservedSQL = `coalesce(nullif(observed_time_unix_nano, 0), epoch_us(observed_time) * 1000)`
)

// observedSQL is a record's observed_timestamp structured metadata in
// Unix ns, 0 for none: Loki adds it to a record with a time and an
// observed time (pkg/loghttp/push/otlplabels/labels.go LogAttrsToLabels;
// a record without a time is at its observed time). Exact when the row
// has observed_time_unix_nano, else to the microsecond.
const observedSQL = `CASE WHEN "time" IS NOT NULL THEN coalesce(nullif(observed_time_unix_nano, 0), epoch_us(observed_time) * 1000) END`

// lineSQL is a record's line: its body as Loki's OTLP ingestion writes
// it (pkg/loghttp/push/otlp.go: log.Body().AsString()), "" for none;
// a map or an array (structuredSQL) as the table's JSON, which the
// source rewrites as AsString does (structuredLine): SQL cannot sort
// the keys of every nested map.
var lineSQL = `coalesce(` + asStringSQL("body", "'$'") + `, '')`

// structuredSQL is whether a record's body is a map or an array: its
// line as lineSQL reads it is not yet Loki's.
const structuredSQL = `coalesce(json_type(body, '$') IN ('OBJECT', 'ARRAY'), false)`

// asStringSQL is the SQL of the JSON value at path of doc as pdata's
// AsString writes the attribute it holds, for scalars: a double without
// the .0 its JSON has when whole, and with the + of a positive exponent
// (DuckDB prints a double 2.0 and 1e21, float64AsString 2 and 1e+21;
// a negative exponent, 1e-7, and a fraction are alike); any other value
// as json_extract_string reads it.
func asStringSQL(doc, path string) string {
	extract := `json_extract_string(` + doc + `, ` + path + `)`
	return `CASE json_type(` + doc + `, ` + path + `) WHEN 'DOUBLE' THEN regexp_replace(regexp_replace(` + extract +
		`, '\.0$', ''), 'e([0-9])', 'e+\1') ELSE ` + extract + ` END`
}

// entryColumns are what a query reads of each record, in row's order;
// distinct over them is distinct records (the landing table may hold a
// record twice: a client's retry). With all (an operator's read of every
// tenant) the record's tenant is one of them, so that two tenants'
// identical records stay two; else it is "" (the reader's view holds one
// tenant's rows).
func entryColumns(ts string, all bool) string {
	return ts + ` AS ts, ` + lineSQL + ` AS line, ` + serviceSQL + ` AS service, coalesce(resource_attributes::VARCHAR, '') AS res,
		coalesce(scope_attributes::VARCHAR, '') AS scope_attrs, coalesce(log_attributes::VARCHAR, '') AS attrs,
		coalesce(scope_name, '') AS scope_name, coalesce(scope_version, '') AS scope_version, coalesce(severity_text, '') AS severity_text,
		coalesce(severity_number, 0) AS severity_number, coalesce(trace_id, '') AS trace_id, coalesce(span_id, '') AS span_id,
		coalesce(flags, 0) AS flags, coalesce(dropped_attributes_count, 0) AS dropped, ` + levelSQL + ` AS level, ` +
		tenantSQL(all) + ` AS tenant, ` + structuredSQL + ` AS structured, coalesce(event_name, '') AS event_name, ` + exact(ts) + ` AS exact, ` +
		observedSQL + ` AS observed`
}

// tenantSQL is the SQL of a row's tenant for the label tenantLabel: its
// tenant_id in an operator's read of every tenant (all), else empty (no
// label: a tenant's own read has none, as Loki's querier of one tenant).
func tenantSQL(all bool) string {
	if all {
		return `coalesce(tenant_id, '')`
	}
	return `''`
}

// exact is the SQL of whether the time expression ts is a record's exact
// nanosecond (time_unix_nano, observed_time_unix_nano), not its
// microsecond column's.
func exact(ts string) string {
	switch ts {
	case tsSQL:
		return `coalesce(time_unix_nano, 0) <> 0`
	case tsObservedSQL:
		return `coalesce(observed_time_unix_nano, 0) <> 0`
	}
	return `false`
}

// serviceSQL is the SQL of a record's service_name: the service.name
// column, else the discovered attribute first in the resource's order
// (as Loki's service name discovery goes through the resource,
// pkg/loghttp/push/otlplabels/labels.go ResourceAttrsToStreamLabels),
// else unknown_service. The resource column keeps the attributes in the
// order received: each candidate's position among its keys decides.
var serviceSQL = func() string {
	var values, positions []string
	for _, a := range discovered {
		v := `nullif(json_extract_string(resource_attributes, ` + sqltext.String(`$."`+a+`"`) + `), '')`
		values = append(values, v)
		positions = append(positions, `CASE WHEN `+v+` IS NOT NULL THEN list_position(json_keys(resource_attributes), `+sqltext.String(a)+`) END`)
	}
	first := `CASE least(` + strings.Join(positions, ", ") + `)`
	for i := range discovered {
		first += ` WHEN ` + positions[i] + ` THEN ` + values[i]
	}
	first += ` END`
	return `coalesce(nullif(service_name, ''), ` + first + `, '` + unknownService + `')`
}()

// labelSQL is the SQL of a stream label's value ("" when absent), or ""
// for a name no stream has; tenantLabel is a stream label of an
// operator's read of every tenant (all) alone.
func labelSQL(name string, all bool) string {
	switch name {
	case tenantLabel:
		if all {
			return tenantSQL(all)
		}
		return ""
	case serviceLabel:
		return serviceSQL
	case levelLabel:
		return levelSQL
	}
	for _, a := range indexed {
		if labelName(a) == name {
			return `coalesce(` + asStringSQL("resource_attributes", sqltext.String(`$."`+a+`"`)) + `, '')`
		}
	}
	return ""
}

// sqlArgs collects a statement's parameters in order.
type sqlArgs []any

func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "?"
}

// matcherSQL is a matcher's condition; a matcher on a label no stream
// has compares "" (Loki: an absent label is empty).
func matcherSQL(m *logql.Matcher, all bool, args *sqlArgs) string {
	expr := labelSQL(m.Name, all)
	if expr == "" {
		if m.Matches("") {
			return "true"
		}
		return "false"
	}
	switch m.Op {
	case logql.MatchEq:
		if m.Name == serviceLabel && m.Value != unknownService && m.Value != "" {
			// On the column itself, so that the scan filters by it
			// before it reads the other columns of a row: the value, or
			// '' for a resource without service.name whose service is
			// discovered (no value of the label is '').
			v := args.add(m.Value)
			return "service_name IN (" + v + ", '') AND " + expr + " = " + args.add(m.Value)
		}
		return expr + " = " + args.add(m.Value)
	case logql.MatchNotEq:
		return expr + " <> " + args.add(m.Value)
	case logql.MatchRe:
		return "regexp_full_match(" + expr + ", " + args.add("(?s:"+m.Value+")") + ")"
	default:
		return "NOT regexp_full_match(" + expr + ", " + args.add("(?s:"+m.Value+")") + ")"
	}
}

// lineFilterSQL is a line filter's condition on the line column; the
// regular expressions are RE2's in DuckDB as in Go.
func lineFilterSQL(f *logql.LineFilter, args *sqlArgs) string {
	var ors []string
	for _, v := range f.Values {
		switch f.Op {
		case logql.LineContains, logql.LineNotContains:
			ors = append(ors, "contains(line, "+args.add(v)+")")
		default:
			ors = append(ors, "regexp_matches(line, "+args.add(v)+")")
		}
	}
	cond := "(" + strings.Join(ors, " OR ") + ")"
	if f.Op.Negated() {
		cond = "NOT " + cond
	}
	return cond
}

// scanSQL is the records of table whose streams the matchers select in
// [start, end) ns, as entryColumns (all: an operator's read of every
// tenant, each record with its tenant). The time
// bounds are on the microsecond column too, which the scan prunes row
// groups by; records without a time are found by their observed time in
// a second scan, so that neither loses its pruning to an OR.
func scanSQL(table string, ms []*logql.Matcher, start, end int64, all bool, args *sqlArgs) string {
	var b strings.Builder
	for i, branch := range []struct{ ts, col, extra string }{
		{tsSQL, `"time"`, ""},
		{tsObservedSQL, "observed_time", `"time" IS NULL AND `},
	} {
		if i > 0 {
			b.WriteString("\nUNION ALL\n")
		}
		fmt.Fprintf(&b, "SELECT %s FROM %s WHERE %s%s >= %s AND %s < %s", entryColumns(branch.ts, all), sqltext.Ident(table), branch.extra,
			branch.col, timestampSQL(start), branch.col, timestampSQL(addNanos(end, 999)))
		for _, m := range ms {
			b.WriteString(" AND ")
			b.WriteString(matcherSQL(m, all, args))
		}
	}
	return b.String()
}

// addNanos is a + b (b >= 0) held at int64's end: a range may end at
// its last nanosecond (a request for everything), and an end widened
// past it wrapped to 1677, which emptied the range.
func addNanos(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// timestampSQL is the TIMESTAMP literal of ns truncated to microseconds:
// a literal, which the scan's zone maps compare with, where a parameter
// of Go's time.Time would bind as TIMESTAMP WITH TIME ZONE.
func timestampSQL(ns int64) string {
	return "TIMESTAMP '" + time.Unix(0, ns).UTC().Truncate(time.Microsecond).Format("2006-01-02 15:04:05.999999") + "'"
}

// entryKey are entryColumns but the time, which distinctSQL compares to
// the microsecond: the tenant among them, so that an operator's read
// never makes two tenants' identical records one.
const entryKey = `line, service, res, scope_attrs, attrs, scope_name, scope_version, severity_text, severity_number,
	trace_id, span_id, flags, dropped, level, tenant, structured, event_name`

// distinctSQL is the distinct records of scan (rows of entryColumns):
// copies of a record are one, with its exact time, then its observed
// time (0 for none). Records of the same line and stream at two
// nanoseconds of one microsecond are two, as Loki keeps them. A copy
// loaded before time_unix_nano (observed_time_unix_nano) existed has its
// time to the microsecond only: it is dropped when a copy of the same
// microsecond has the exact time (a retry across the upgrade); its
// observed time, to the microsecond, gives way to an exact one (the
// greater) of a copy at the same time.
func distinctSQL(scan string) string {
	return `SELECT ts, ` + entryKey + `, observed FROM (SELECT ts, ` + entryKey + `, exact, observed, bool_or(exact) OVER (PARTITION BY ts // 1000, ` + entryKey +
		`) AS has_exact FROM (SELECT ts, ` + entryKey + `, exact, coalesce(max(observed), 0) AS observed FROM (` + scan + `) GROUP BY ts, ` + entryKey + `, exact)) WHERE exact OR NOT has_exact`
}

// selectSQL is the statement of a Selection: distinct records, exact
// time bounds and line filters, in the direction asked, at most limit
// (none when 0); all for an operator's read of every tenant. The line
// filters pass every record of a structured body, whose line the
// source makes and filters (structuredLine).
func selectSQL(table string, sel logql.Selection, limit int, all bool, args *sqlArgs) string {
	var b strings.Builder
	b.WriteString("SELECT * FROM (")
	b.WriteString(distinctSQL(scanSQL(table, sel.Matchers, sel.Start, sel.End, all, args)))
	fmt.Fprintf(&b, ") WHERE ts >= %s AND ts < %s", args.add(sel.Start), args.add(sel.End))
	for _, f := range sel.Filters {
		b.WriteString(" AND (structured OR ")
		b.WriteString(lineFilterSQL(f, args))
		b.WriteString(")")
	}
	if sel.Forward {
		b.WriteString(" ORDER BY ts")
	} else {
		b.WriteString(" ORDER BY ts DESC")
	}
	if limit > 0 {
		fmt.Fprintf(&b, " LIMIT %d", limit)
	}
	return b.String()
}

// streamsSQL is the streams of a selection with their distinct records'
// count and bytes, for the labels, series and index APIs; with a step
// (ns), by bucket of step from volumeOrigin (bucket 0 without); with
// all (an operator's read of every tenant), each tenant's apart. With
// lineBytes (index/stats, volume), the bytes are the lines' as
// query_range answers them: a structured body's line (its JSON as the
// table holds it, of another length than its AsString) is a row of its
// own, with no bytes, which the reader counts (structuredLine); the
// routes that answer labels alone read one row per stream and bucket.
func streamsSQL(table string, ms []*logql.Matcher, start, end, step int64, all, lineBytes bool, args *sqlArgs) string {
	bucket := "0"
	if step > 0 {
		bucket = fmt.Sprintf("(ts - %d) // %d", volumeOrigin(start, step), step)
	}
	structured := `NULL::VARCHAR`
	if lineBytes {
		structured = `CASE WHEN structured THEN line END`
	}
	return `SELECT service, res, level, count(*) AS entries, sum(CASE WHEN ` + structured + ` IS NOT NULL THEN 0 ELSE strlen(line) END)::BIGINT AS bytes, ` + bucket +
		` AS bucket, tenant, ` + structured + ` AS structured_line FROM (SELECT * FROM (` + distinctSQL(scanSQL(table, ms, start, end, all, args)) + `) WHERE ts >= ` + args.add(start) +
		` AND ts < ` + args.add(end) + `) GROUP BY ALL`
}

// volumeOrigin is where volume_range's steps of step ns start: Loki's
// volume middleware splits the range by pkg/util/time.go ForInterval,
// which aligns its start (the request's, truncated to the millisecond:
// pkg/util/conv.go RoundToMilliseconds) to a multiple of step since the
// epoch, by Go's remainder; the first step begins at start itself, no
// record before it being read.
func volumeOrigin(start, step int64) int64 {
	from := start / int64(time.Millisecond) * int64(time.Millisecond)
	return from - from%step
}

// volumeThrough is the end of a volume request as Loki takes it,
// rounded up to the millisecond (pkg/util/conv.go RoundToMilliseconds),
// in ns: where its last step is stamped.
func volumeThrough(end int64) int64 {
	ms := end / int64(time.Millisecond)
	if time.Unix(0, end).Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms * int64(time.Millisecond)
}
