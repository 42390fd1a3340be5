// Package otel turns OpenTelemetry (OTLP) messages into rows of declared
// tables, written as the NDJSON the sinks load: one row per span of
// otel_spans, per log record of otel_logs, per metric data point of
// otel_metrics. It never knows the sink.
package otel

import "github.com/tracelake/tracelake/internal/schema"

// Spans is the spans table: one row per span. Ids are lowercase hex,
// times UTC microseconds, attributes JSON objects keeping their OTLP types
// (ints, doubles, bools, arrays, maps; bytes as base64 strings).
var Spans = schema.Table{
	Name: "otel_spans", Tenant: "tenant_id", Time: "start_time",
	Columns: []schema.Column{
		{Name: "tenant_id", Type: schema.String},
		{Name: "service_name", Type: schema.String},
		{Name: "trace_id", Type: schema.String},
		{Name: "span_id", Type: schema.String},
		{Name: "parent_span_id", Type: schema.String},
		{Name: "trace_state", Type: schema.String},
		{Name: "name", Type: schema.String},
		{Name: "kind", Type: schema.String},
		{Name: "status_code", Type: schema.String},
		{Name: "status_message", Type: schema.String},
		{Name: "start_time", Type: schema.Timestamp},
		{Name: "end_time", Type: schema.Timestamp},
		{Name: "duration_ns", Type: schema.Int64},
		{Name: "resource_attributes", Type: schema.JSON},
		{Name: "scope_name", Type: schema.String},
		{Name: "scope_version", Type: schema.String},
		{Name: "scope_attributes", Type: schema.JSON},
		{Name: "span_attributes", Type: schema.JSON},
		{Name: "events", Type: schema.JSON},
		{Name: "links", Type: schema.JSON},
		{Name: "dropped_attributes_count", Type: schema.Int64},
		{Name: "dropped_events_count", Type: schema.Int64},
		{Name: "dropped_links_count", Type: schema.Int64},
		{Name: "flags", Type: schema.Int64},
		// start_time_unix_nano is start_time in nanoseconds, exact as sent
		// (held at int64's end past 2262):
		// the APIs that answer OTLP's times (Tempo) need them, and
		// start_time keeps microseconds, as every sink's timestamps do.
		{Name: "start_time_unix_nano", Type: schema.Int64},
	},
}

// Logs is the logs table: one row per log record.
var Logs = schema.Table{
	Name: "otel_logs", Tenant: "tenant_id", Time: "time",
	Columns: []schema.Column{
		{Name: "tenant_id", Type: schema.String},
		{Name: "service_name", Type: schema.String},
		{Name: "time", Type: schema.Timestamp},
		{Name: "observed_time", Type: schema.Timestamp},
		{Name: "severity_text", Type: schema.String},
		{Name: "severity_number", Type: schema.Int32},
		{Name: "body", Type: schema.JSON},
		{Name: "event_name", Type: schema.String},
		{Name: "trace_id", Type: schema.String},
		{Name: "span_id", Type: schema.String},
		{Name: "flags", Type: schema.Int64},
		{Name: "resource_attributes", Type: schema.JSON},
		{Name: "scope_name", Type: schema.String},
		{Name: "scope_version", Type: schema.String},
		{Name: "scope_attributes", Type: schema.JSON},
		{Name: "log_attributes", Type: schema.JSON},
		{Name: "dropped_attributes_count", Type: schema.Int64},
		// time_unix_nano is time in nanoseconds, exact as sent (Loki
		// answers them).
		{Name: "time_unix_nano", Type: schema.Int64},
		// observed_time_unix_nano is observed_time in nanoseconds, exact
		// as sent: Loki answers it, as the time of a record without one
		// and as its observed_timestamp.
		{Name: "observed_time_unix_nano", Type: schema.Int64},
	},
}

// Metrics is the metric points table: one row per data point, whatever
// the metric's type; the columns of other types are null. Gauges and sums
// fill value (and value_int, exact, for integer points); histograms count,
// sum, min, max, bucket_counts and explicit_bounds; exponential histograms
// scale, zero_count, zero_threshold, positive and negative
// ({offset, bucket_counts}); summaries count, sum and quantiles
// ([{quantile, value}]).
var Metrics = schema.Table{
	Name: "otel_metrics", Tenant: "tenant_id", Time: "time",
	Columns: []schema.Column{
		{Name: "tenant_id", Type: schema.String},
		{Name: "service_name", Type: schema.String},
		{Name: "metric_name", Type: schema.String},
		{Name: "metric_description", Type: schema.String},
		{Name: "metric_unit", Type: schema.String},
		{Name: "metric_type", Type: schema.String},
		{Name: "temporality", Type: schema.String},
		{Name: "is_monotonic", Type: schema.Bool},
		{Name: "time", Type: schema.Timestamp},
		{Name: "start_time", Type: schema.Timestamp},
		{Name: "value", Type: schema.Float64},
		{Name: "value_int", Type: schema.Int64},
		{Name: "count", Type: schema.Int64},
		{Name: "sum", Type: schema.Float64},
		{Name: "min", Type: schema.Float64},
		{Name: "max", Type: schema.Float64},
		{Name: "bucket_counts", Type: schema.JSON},
		{Name: "explicit_bounds", Type: schema.JSON},
		{Name: "scale", Type: schema.Int32},
		{Name: "zero_count", Type: schema.Int64},
		{Name: "zero_threshold", Type: schema.Float64},
		{Name: "positive", Type: schema.JSON},
		{Name: "negative", Type: schema.JSON},
		{Name: "quantiles", Type: schema.JSON},
		{Name: "exemplars", Type: schema.JSON},
		{Name: "flags", Type: schema.Int64},
		{Name: "resource_attributes", Type: schema.JSON},
		{Name: "scope_name", Type: schema.String},
		{Name: "scope_version", Type: schema.String},
		{Name: "scope_attributes", Type: schema.JSON},
		{Name: "attributes", Type: schema.JSON},
	},
}
