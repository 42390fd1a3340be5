package otel

import "go.opentelemetry.io/collector/pdata/plog"

// appendLogs writes one row of Logs per log record; it returns the rows
// and the longest line.
func appendLogs(w *row, ld plog.Logs, src source) (rows, longest int) {
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		rl := rls.At(i)
		res := rl.Resource().Attributes()
		service := serviceName(res)
		// Encoded once, written with each of their records.
		resJSON := appendMap(nil, res)
		sls := rl.ScopeLogs()
		for j := range sls.Len() {
			sl := sls.At(j)
			scope := sl.Scope()
			scopeJSON := appendMap(nil, scope.Attributes())
			records := sl.LogRecords()
			for k := range records.Len() {
				l := records.At(k)
				start := len(w.b)
				w.begin()
				w.str("tenant_id", src.tenant)
				w.str("service_name", service)
				w.time("time", l.Timestamp())
				w.time("observed_time", l.ObservedTimestamp())
				w.str("severity_text", l.SeverityText())
				w.int("severity_number", int64(l.SeverityNumber()))
				w.key("body")
				w.b = appendValue(w.b, l.Body())
				w.str("event_name", l.EventName())
				tid, sid := l.TraceID(), l.SpanID()
				w.id("trace_id", tid[:])
				w.id("span_id", sid[:])
				w.int("flags", int64(l.Flags()))
				w.raw("resource_attributes", resJSON)
				w.str("scope_name", scope.Name())
				w.str("scope_version", scope.Version())
				w.raw("scope_attributes", scopeJSON)
				w.attrs("log_attributes", l.Attributes())
				w.int("dropped_attributes_count", int64(l.DroppedAttributesCount()))
				w.coordinates(src, rows)
				w.end()
				rows++
				longest = max(longest, len(w.b)-start)
			}
		}
	}
	return rows, longest
}
