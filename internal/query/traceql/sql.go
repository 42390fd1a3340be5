package traceql

import (
	"fmt"
	"strings"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// The SQL reads the spans table of otel.Spans. A span's times are exact
// nanoseconds: start_time_unix_nano, else (rows loaded before that column
// existed) start_time's microseconds × 1000.
const (
	// StartNanos is the SQL of a span's start in nanoseconds, NULL for a
	// span sent without one (OTLP's 0, unset; start_time NULL): read as
	// 0, it was a trace's first start, which began in 1970 and lasted
	// 56 years.
	StartNanos = "coalesce(nullif(start_time_unix_nano, 0), epoch_us(start_time) * 1000)"
	// spanColumns are the columns of the span relation (sp) the
	// conditions read.
	spanColumns = "tenant_id, trace_id, span_id, parent_span_id, name, kind, status_code, status_message, service_name, " +
		StartNanos + " AS start_ns, duration_ns, resource_attributes, span_attributes"
)

// EndNanos is the SQL of a span's end in nanoseconds from the SQL of its
// start in nanoseconds and of its duration, held at int64's end as
// start_time_unix_nano is: OTLP's times are uint64, so a span starting
// before 2262-04-11 may end after it (a skewed clock, an end of all
// ones), and DuckDB's BIGINT addition fails the whole statement on
// overflow ("Overflow in addition of INT64") rather than wrapping, which
// took every search over the span's window with it. Null when start or dur is.
func EndNanos(start, dur string) string {
	// Not least(…): DuckDB's least skips a NULL, so the end of a span
	// without a start or a duration was int64's end, and its trace
	// lasted some 290 years ({ traceDuration < 2s } missed it).
	sum := "(" + start + ")::HUGEINT + (" + dur + ")"
	return "(CASE WHEN " + sum + " > 9223372036854775807 THEN 9223372036854775807 ELSE " + sum + " END)::BIGINT"
}

// Builder writes the SQL of a query, collecting its parameters ($1, $2, …).
type Builder struct {
	Params []any
	// Table is the spans table.
	Table string
	// StartMicros, EndMicros bound the spans read by start_time
	// (microseconds since the epoch, inclusive); 0, 0 for no bound.
	StartMicros, EndMicros int64
	// ReachMicros, when positive, makes the window select traces rather
	// than spans, as Tempo's search does: the spans read are those of
	// the traces with a span running during the window, each trace's
	// spans starting within ReachMicros of it (Matches names them win).
	ReachMicros int64
	// EndNanos, when positive and the window selects traces, is the
	// window's exact end in nanoseconds, which a trace's first start
	// must not pass: Tempo's search compares it with end×1e9 ns
	// (pkg/traceql/engine.go unixSecToNano(searchReq.End)), not with
	// the end second's last nanosecond. Zero: through EndMicros' last
	// nanosecond.
	EndNanos int64
	// TraceReachMicros, when positive and the window selects spans (no
	// ReachMicros), makes the trace-level intrinsics (rootName,
	// rootServiceName, traceDuration) those of each whole trace with a
	// span in the window, read from its spans starting within
	// TraceReachMicros of the window, not of its spans in the window
	// alone: Tempo keeps them with the trace, so a span in the window
	// knows its trace's root even when the root started before it.
	TraceReachMicros int64

	ctes  []string
	trace bool // a condition reads trace-level intrinsics
}

// UseTraceIntrinsics makes Matches define tr, the trace-level
// intrinsics of each trace (trace_id, root_name, root_service_name,
// trace_duration_ns), for a caller that reads them, as by(rootName)
// does. Call it before Matches.
func (b *Builder) UseTraceIntrinsics() { b.trace = true }

// Param adds a parameter and returns its placeholder.
func (b *Builder) Param(v any) string {
	b.Params = append(b.Params, v)
	return fmt.Sprintf("$%d", len(b.Params))
}

// Window is the SQL condition on start_time of the builder's bounds,
// "TRUE" without.
func (b *Builder) Window() string {
	if b.StartMicros == 0 && b.EndMicros == 0 {
		return "TRUE"
	}
	return fmt.Sprintf("start_time BETWEEN make_timestamp(%s) AND make_timestamp(%s)", b.Param(b.StartMicros), b.Param(b.EndMicros))
}

// StartlessSince is the condition of the spans without a start (OTLP's
// 0: a NULL start_time, which no window on start_time holds) that ended
// at or after lo (µs since the epoch), or have no end either (NULL
// end_time: no time to be in a window by, a span of its trace all the
// same). Bounded by end_time (not by trace_id alone), a read of them
// prunes as the window's does, in DuckDB's row groups and Iceberg's
// files (the OR on the one column is pushed to both scans, IS NULL by
// the null counts); a table with a few such spans in most row groups was
// read whole for each trace asked for in a window. One condition, not a
// branch (a scan) for each disjunct: a query's every scan costs DuckDB's
// planning where no span lacks a start (~2.5 CPU ms of a trace by id).
func (b *Builder) StartlessSince(lo int64) string {
	return fmt.Sprintf("start_time IS NULL AND (end_time IS NULL OR end_time BETWEEN make_timestamp(%s) AND make_timestamp(%s))",
		b.Param(max(lo, 1)), b.Param(int64(1<<62-1)))
}

// SpanRelation is the SQL of the table's spans in the window, with the
// columns the conditions read, as a subquery to name.
func (b *Builder) SpanRelation() string {
	if b.traces() {
		return "win"
	}
	return fmt.Sprintf("(SELECT %s FROM %s WHERE %s)", spanColumns, sqltext.Ident(b.Table), b.Window())
}

// SpanKey are the columns that make a span one: its ids, and its tenant.
// Duplicate rows of a span (client retries) are one span; two tenants'
// spans of the same ids are two, in an operator's read of every tenant
// (one tenant's read has one tenant): by its ids alone, a tenant's span
// hid another's, whose trace and span ids it had learnt (a call across
// tenants carries its caller's in traceparent).
const SpanKey = "tenant_id, trace_id, span_id"

// Matches returns the WITH clause (without "WITH") whose last CTE, named
// hit, holds the distinct SpanKey of the spans s matches.
func (b *Builder) Matches(s Spanset) (string, error) {
	b.ctes = nil
	name, err := b.spanset(s)
	if err != nil {
		return "", err
	}
	b.ctes = append(b.ctes, fmt.Sprintf("hit AS (SELECT DISTINCT %s FROM %s)", SpanKey, name))
	if b.trace {
		b.ctes = append([]string{b.traceCTE()}, b.ctes...)
	}
	if b.traces() {
		b.ctes = append([]string{b.windowCTE()}, b.ctes...)
	}
	return strings.Join(b.ctes, ",\n"), nil
}

// traces says whether the window selects traces (ReachMicros).
func (b *Builder) traces() bool {
	return b.ReachMicros > 0 && (b.StartMicros != 0 || b.EndMicros != 0)
}

// windowCTE is win, the spans of the traces running during the window
// (their first start by its end, their last end at its start or after:
// tempodb/encoding/vparquet4/block_traceql.go createAllIterator's trace
// time range), read within ReachMicros of the window.
func (b *Builder) windowCTE() string {
	lo := b.Param(max(b.StartMicros-b.ReachMicros, 1))
	hi := b.Param(min(b.EndMicros, 1<<62-1-b.ReachMicros) + b.ReachMicros)
	end := b.EndMicros*1000 + 999
	if b.EndNanos > 0 {
		end = b.EndNanos
	}
	startNanos, endNanos := b.Param(b.StartMicros*1000), b.Param(end)
	t := sqltext.Ident(b.Table)
	// The spans of those traces sent without a start (OTLP's 0, a broken
	// clock: a NULL start_time, which no window holds) are theirs too, as
	// a search without a window finds them, by their end: at or after
	// the first start read (a span ends after it starts), however long
	// after (its start, unknown, may be any before its end: within the
	// starts read too), and those without an end either: in a branch of
	// their own, so that the window's condition still prunes the other's
	// scan (an OR of conditions on two columns is pushed to neither
	// DuckDB's scan nor Iceberg's). The traces' condition (IN
	// win_traces) is on the union, once: written in each branch, it made
	// win_traces a CTE read three times, whose scan DuckDB pushes no
	// join filter to, and the window's branch read every span of the
	// window (3 times the spans of the traces running in it) where one
	// semi join on the union has the window's scan keep only the traces'
	// spans, as before the branches. Each branch names its columns: a
	// branch selecting * had the Iceberg reader's scan read every column
	// of the table (events, links, scope attributes: most of a span's
	// bytes), the columns a scan reads being those its SELECT names.
	startless := b.StartlessSince(b.StartMicros - b.ReachMicros)
	return fmt.Sprintf(`win_traces AS (SELECT trace_id FROM %[2]s WHERE start_time BETWEEN make_timestamp(%[3]s) AND make_timestamp(%[4]s)
			GROUP BY trace_id HAVING min(%[5]s) <= %[7]s AND max(%[8]s) >= %[6]s),
	win AS (SELECT * FROM (SELECT %[1]s FROM %[2]s WHERE start_time BETWEEN make_timestamp(%[3]s) AND make_timestamp(%[4]s)
		UNION ALL SELECT %[1]s FROM %[2]s WHERE %[9]s) AS spans
		WHERE trace_id IN (SELECT trace_id FROM win_traces))`,
		spanColumns, t, lo, hi, StartNanos, startNanos, endNanos, EndNanos(StartNanos, "coalesce(duration_ns, 0)"), startless)
}

// traceCTE is the trace-level intrinsics of each trace in the window: the
// root span's name and service (the span without a parent), and the
// trace's duration, from its first start to its last end.
func (b *Builder) traceCTE() string {
	return fmt.Sprintf(`tr AS (SELECT trace_id,
		arg_min(name, coalesce(start_ns, 0)) FILTER (WHERE parent_span_id IS NULL) AS root_name,
		arg_min(service_name, coalesce(start_ns, 0)) FILTER (WHERE parent_span_id IS NULL) AS root_service_name,
		max(%s) - min(start_ns) AS trace_duration_ns
		FROM %s sp GROUP BY trace_id)`, EndNanos("start_ns", "coalesce(duration_ns, 0)"), b.traceLevelRelation())
}

// traceLevelRelation is the spans the trace-level intrinsics are
// computed from: the span relation, or with TraceReachMicros (and a
// window selecting spans) the spans of the window's traces within that
// reach of it.
func (b *Builder) traceLevelRelation() string {
	if b.traces() || b.TraceReachMicros <= 0 || (b.StartMicros == 0 && b.EndMicros == 0) {
		return b.SpanRelation()
	}
	lo := b.Param(max(b.StartMicros-b.TraceReachMicros, 1))
	hi := b.Param(min(b.EndMicros, 1<<62-1-b.TraceReachMicros) + b.TraceReachMicros)
	t := sqltext.Ident(b.Table)
	return fmt.Sprintf(`(SELECT %[1]s FROM %[2]s WHERE start_time BETWEEN make_timestamp(%[3]s) AND make_timestamp(%[4]s)
		AND trace_id IN (SELECT trace_id FROM %[2]s WHERE %[5]s))`, spanColumns, t, lo, hi, b.Window())
}

func (b *Builder) cte(body string) string {
	name := fmt.Sprintf("s%d", len(b.ctes)+1)
	b.ctes = append(b.ctes, fmt.Sprintf("%s AS (%s)", name, body))
	return name
}

// spanset adds the CTEs of s and returns the name of the last, whose rows
// are the matched spans' tenant_id, trace_id, span_id and parent_span_id.
func (b *Builder) spanset(s Spanset) (string, error) {
	switch s := s.(type) {
	case Filter:
		cond := "TRUE"
		if s.Cond != nil {
			c, err := b.cond(s.Cond)
			if err != nil {
				return "", err
			}
			cond = c
		}
		from := b.SpanRelation() + " sp"
		if usesTrace(s.Cond) {
			b.trace = true
			from += " JOIN tr USING (trace_id)"
		}
		return b.cte(fmt.Sprintf("SELECT tenant_id, trace_id, span_id, parent_span_id FROM %s WHERE %s", from, cond)), nil
	case SpansetOp:
		l, r, err := both(b.spanset, s.L, s.R)
		if err != nil {
			return "", err
		}
		return b.cte(b.combine(s.Op, l, r)), nil
	}
	return "", fmt.Errorf("BUG: spanset %T", s)
}

// combine is the SQL of l op r (upstream semantics, pkg/traceql
// ast_execute.go and the structural operators of the TraceQL docs): &&
// keeps both sides' spans of the traces where both match, || either
// side's, and a structural operator keeps the right-hand spans standing
// in that relation to a left-hand span of their trace.
func (b *Builder) combine(op, l, r string) string {
	sameTrace := "x.trace_id = y.trace_id"
	switch op {
	case "&&":
		return fmt.Sprintf(`SELECT * FROM %[1]s WHERE trace_id IN (SELECT trace_id FROM %[2]s)
			UNION SELECT * FROM %[2]s WHERE trace_id IN (SELECT trace_id FROM %[1]s)`, l, r)
	case "||":
		return fmt.Sprintf("SELECT * FROM %s UNION SELECT * FROM %s", l, r)
	case ">":
		return fmt.Sprintf("SELECT * FROM %s y WHERE EXISTS (SELECT 1 FROM %s x WHERE %s AND x.span_id = y.parent_span_id)", r, l, sameTrace)
	case "<":
		return fmt.Sprintf("SELECT * FROM %s y WHERE EXISTS (SELECT 1 FROM %s x WHERE %s AND x.parent_span_id = y.span_id)", r, l, sameTrace)
	case "~":
		return fmt.Sprintf(`SELECT * FROM %s y WHERE EXISTS (SELECT 1 FROM %s x WHERE %s
			AND x.parent_span_id = y.parent_span_id AND x.span_id <> y.span_id)`, r, l, sameTrace)
	case ">>":
		// The descendants of the left-hand spans, walked down their
		// traces (UNION: a span met twice is walked once).
		down := b.cte(fmt.Sprintf(`WITH RECURSIVE d(trace_id, span_id) AS (
				SELECT c.trace_id, c.span_id FROM %[1]s c JOIN %[2]s x ON c.trace_id = x.trace_id AND c.parent_span_id = x.span_id
				UNION SELECT c.trace_id, c.span_id FROM %[1]s c JOIN d ON c.trace_id = d.trace_id AND c.parent_span_id = d.span_id)
			SELECT * FROM d`, b.SpanRelation(), l))
		return fmt.Sprintf("SELECT * FROM %s y WHERE EXISTS (SELECT 1 FROM %s x WHERE %s AND x.span_id = y.span_id)", r, down, sameTrace)
	case "<<":
		// The ancestors of the left-hand spans, walked up their traces.
		up := b.cte(fmt.Sprintf(`WITH RECURSIVE a(trace_id, span_id, parent_span_id) AS (
				SELECT p.trace_id, p.span_id, p.parent_span_id FROM %[1]s p JOIN %[2]s x ON p.trace_id = x.trace_id AND p.span_id = x.parent_span_id
				UNION SELECT p.trace_id, p.span_id, p.parent_span_id FROM %[1]s p JOIN a ON p.trace_id = a.trace_id AND p.span_id = a.parent_span_id)
			SELECT * FROM a`, b.SpanRelation(), l))
		return fmt.Sprintf("SELECT * FROM %s y WHERE EXISTS (SELECT 1 FROM %s x WHERE %s AND x.span_id = y.span_id)", r, up, sameTrace)
	}
	panic("BUG: spanset operator " + op)
}

// both is the SQL of two operands.
func both[T any](f func(T) (string, error), l, r T) (string, string, error) {
	ls, err := f(l)
	if err != nil {
		return "", "", err
	}
	rs, err := f(r)
	return ls, rs, err
}

// usesTrace says whether e reads a trace-level intrinsic.
func usesTrace(e Expr) bool {
	switch e := e.(type) {
	case Logical:
		return usesTrace(e.L) || usesTrace(e.R)
	case Not:
		return usesTrace(e.X)
	case Comparison:
		return isTraceLevel(e.Attr)
	}
	return false
}

func isTraceLevel(a Attribute) bool {
	return a.Scope == Intrinsic && (a.Name == IntrinsicRootName || a.Name == IntrinsicRootServiceName || a.Name == IntrinsicTraceDuration)
}

// cond is the SQL of a condition over the span relation sp (and tr).
func (b *Builder) cond(e Expr) (string, error) {
	switch e := e.(type) {
	case Logical:
		l, r, err := both(b.cond, e.L, e.R)
		if err != nil {
			return "", err
		}
		op := "AND"
		if e.Op == "||" {
			op = "OR"
		}
		return "(" + l + " " + op + " " + r + ")", nil
	case Not:
		x, err := b.cond(e.X)
		if err != nil {
			return "", err
		}
		// A comparison with a missing attribute is false, and so is its
		// negation (upstream: nil compares false to everything).
		return "(NOT coalesce(" + x + ", FALSE))", nil
	case Attribute:
		// {.a} holds for a boolean attribute that is true.
		return b.cond(Comparison{Attr: e, Op: "=", Value: Static{Kind: Bool, B: true}})
	case Comparison:
		return b.comparison(e)
	case Literal:
		if e.B {
			return "TRUE", nil
		}
		return "FALSE", nil
	}
	return "", fmt.Errorf("BUG: condition %T", e)
}

// intrinsicColumns are the columns of the intrinsics.
var intrinsicColumns = map[string]string{
	IntrinsicName: "name", IntrinsicStatus: "status_code", IntrinsicStatusMessage: "status_message",
	IntrinsicKind: "kind", IntrinsicDuration: "duration_ns", IntrinsicRootName: "root_name",
	IntrinsicRootServiceName: "root_service_name", IntrinsicTraceDuration: "trace_duration_ns",
}

func (b *Builder) comparison(c Comparison) (string, error) {
	if c.Value.Kind == Nil {
		return b.exists(c.Attr, c.Op == "!="), nil
	}
	if c.Op == "=~" || c.Op == "!~" {
		// `.` matches a newline: upstream's regular expressions are
		// Prometheus's FastRegexMatcher (pkg/regexp/regexp.go), which
		// compiles "^(?s:" + re + ")$".
		c.Value.S = "(?s:" + c.Value.S + ")"
	}
	if c.Attr.Scope == Intrinsic && c.Attr.Name == IntrinsicNestedSetParent {
		root, other, ok := NestedSetParentAnswers(c.Op, c.Value.I)
		switch {
		case !ok:
			return "", fmt.Errorf("nestedSetParent %s %d is not supported", c.Op, c.Value.I)
		case root && other:
			return "TRUE", nil
		case root:
			return "parent_span_id IS NULL", nil
		case other:
			return "parent_span_id IS NOT NULL", nil
		}
		return "FALSE", nil
	}
	if c.Attr.Scope == Intrinsic {
		col := intrinsicColumns[c.Attr.Name]
		var v any
		switch c.Value.Kind {
		case Duration:
			v = c.Value.D.Nanoseconds()
		case Int:
			v = c.Value.I // nanoseconds
		case Float:
			v = c.Value.F
		default:
			v = c.Value.S
		}
		return compare(col, c.Op, b.Param(v)), nil
	}
	switch c.Attr.Scope {
	case SpanScope:
		return b.attrCompare("span_attributes", c)
	case ResourceScope:
		return b.attrCompare("resource_attributes", c)
	}
	// Unscoped: the span's attribute or the resource's (upstream's
	// unscoped attributes match either).
	s, err := b.attrCompare("span_attributes", c)
	if err != nil {
		return "", err
	}
	r, err := b.attrCompare("resource_attributes", c)
	if err != nil {
		return "", err
	}
	return "(" + s + " OR " + r + ")", nil
}

// exists is the SQL of `a != nil` (present) or `a = nil` (missing,
// present false). Intrinsics are always present (upstream: every span
// has them; validation refuses `= nil` on them), and so is the service.
func (b *Builder) exists(a Attribute, present bool) string {
	var cond string
	switch {
	case a.Scope == Intrinsic:
		cond = "TRUE"
	case a.Scope == ResourceScope && a.Name == "service.name":
		cond = "service_name IS NOT NULL"
	case a.Scope == SpanScope:
		cond = fmt.Sprintf("json_type(span_attributes, %s) IS NOT NULL", JSONPath(a.Name))
	case a.Scope == ResourceScope:
		cond = fmt.Sprintf("json_type(resource_attributes, %s) IS NOT NULL", JSONPath(a.Name))
	default:
		// Unscoped: present in the span or the resource.
		cond = fmt.Sprintf("(json_type(span_attributes, %[1]s) IS NOT NULL OR json_type(resource_attributes, %[1]s) IS NOT NULL)", JSONPath(a.Name))
	}
	if present {
		return cond
	}
	return "NOT " + cond
}

// JSONPath is the JSON pointer (RFC 6901) of a top-level key, as DuckDB's
// json functions take it, written as a SQL string.
func JSONPath(key string) string {
	return sqltext.String("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key))
}

// attrCompare compares an attribute of a JSON column: only values of the
// static's type match (a string attribute "200" is not the int 200), as
// upstream compares typed values; ints and floats compare as numbers.
// An array attribute is compared element by element: =, =~, > and the
// like hold when an element does, != and !~ when every element does
// (upstream ast_execute.go BinaryOperation.execute,
// isMatchingArrayElement: "operators like OpNotEqual ... must check all
// elements").
func (b *Builder) attrCompare(col string, c Comparison) (string, error) {
	if c.Value.Kind == String && col == "resource_attributes" && c.Attr.Name == "service.name" {
		// The service has its own column, cheaper than the JSON.
		return compare("service_name", c.Op, b.Param(c.Value.S)), nil
	}
	path := JSONPath(c.Attr.Name)
	scalar, err := b.valueCompare(col, path, c)
	if err != nil {
		return "", err
	}
	elem, err := b.valueCompare("e", "'$'", c)
	if err != nil {
		return "", err
	}
	all := "list_bool_or"
	if c.Op == "!=" || c.Op == "!~" {
		all = "list_bool_and"
	}
	return fmt.Sprintf("(CASE json_type(%[1]s, %[2]s) WHEN 'ARRAY' THEN coalesce(%[3]s(list_transform(CAST(json_extract(%[1]s, %[2]s) AS JSON[]), lambda e: %[4]s)), FALSE) ELSE %[5]s END)",
		col, path, all, elem, scalar), nil
}

// valueCompare compares the JSON value at path of doc with c's static.
func (b *Builder) valueCompare(doc, path string, c Comparison) (string, error) {
	typ := fmt.Sprintf("json_type(%s, %s)", doc, path)
	switch c.Value.Kind {
	case String:
		return fmt.Sprintf("(%s = 'VARCHAR' AND %s)", typ,
			compare(fmt.Sprintf("json_extract_string(%s, %s)", doc, path), c.Op, b.Param(c.Value.S))), nil
	case Int:
		// An int attribute compares with an int literal as integers,
		// not doubles: past 2^53 neighbouring ints are one double, and
		// `= 1800000000000000000` matched its neighbours (upstream
		// ast_execute.go BinaryOperation.execute, "lhsT == TypeInt &&
		// rhsT == TypeInt"; vparquet4 block_traceql.go
		// createIntPredicate). HUGEINT holds UBIGINT's values too. A
		// double attribute compares as a number (README: kept on
		// purpose, upstream issue #4332).
		return fmt.Sprintf("(CASE %[1]s WHEN 'DOUBLE' THEN %[2]s WHEN 'BIGINT' THEN %[3]s WHEN 'UBIGINT' THEN %[3]s ELSE FALSE END)", typ,
			compare(fmt.Sprintf("CAST(json_extract(%s, %s) AS DOUBLE)", doc, path), c.Op, b.Param(float64(c.Value.I))),
			compare(fmt.Sprintf("CAST(json_extract(%s, %s) AS HUGEINT)", doc, path), c.Op, b.Param(c.Value.I))), nil
	case Float:
		return fmt.Sprintf("(%s IN ('BIGINT', 'UBIGINT', 'DOUBLE') AND %s)", typ,
			compare(fmt.Sprintf("CAST(json_extract(%s, %s) AS DOUBLE)", doc, path), c.Op, b.Param(c.Value.F))), nil
	case Bool:
		return fmt.Sprintf("(%s = 'BOOLEAN' AND %s)", typ,
			compare(fmt.Sprintf("CAST(json_extract(%s, %s) AS BOOLEAN)", doc, path), c.Op, b.Param(c.Value.B))), nil
	}
	return "", fmt.Errorf("%s cannot be compared with a %s", c.Attr, kindName(c.Value.Kind))
}

func kindName(k StaticKind) string {
	return map[StaticKind]string{Duration: "duration", Status: "status", Kind: "kind"}[k]
}

// compare is x op v; a regular expression matches the whole value, as
// upstream anchors them.
func compare(x, op, v string) string {
	switch op {
	case "=~":
		return fmt.Sprintf("regexp_full_match(%s, %s)", x, v)
	case "!~":
		return fmt.Sprintf("NOT regexp_full_match(%s, %s)", x, v)
	}
	return fmt.Sprintf("%s %s %s", x, op, v)
}
