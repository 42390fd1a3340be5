package otel

import "go.opentelemetry.io/collector/pdata/plog"

// appendLogs writes one row of Logs per log record; it returns the rows
// and the longest line.
func appendLogs(w *row, ld plog.Logs, src source, frags *fragments) (rows, longest int) {
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		rl := rls.At(i)
		resMark := frags.mark()
		res := rl.Resource().Attributes()
		service := serviceName(res)
		resJSON, rowHead := frags.attributes(res), frags.head(src.tenant, service)
		sls := rl.ScopeLogs()
		for j := range sls.Len() {
			sl := sls.At(j)
			records := sl.LogRecords()
			if records.Len() == 0 {
				continue // no row copies its fragment (fragments.drop)
			}
			scopeMark := frags.mark()
			scope := frags.scope(resJSON, sl.Scope())
			for k := range records.Len() {
				if w.full() {
					return rows, longest
				}
				l := records.At(k)
				start := len(w.b)
				w.beginWith(rowHead)
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
				w.fragment(scope)
				w.attrs("log_attributes", l.Attributes())
				w.int("dropped_attributes_count", int64(l.DroppedAttributesCount()))
				w.nanos("time_unix_nano", l.Timestamp())
				w.nanos("observed_time_unix_nano", l.ObservedTimestamp())
				w.coordinates(src, rows)
				w.end()
				rows++
				longest = max(longest, len(w.b)-start)
			}
			frags.drop(scopeMark)
		}
		frags.drop(resMark)
	}
	return rows, longest
}
