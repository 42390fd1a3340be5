package prom

import (
	"slices"
	"testing"
)

// TestFamilyNames: metric names as Prometheus's OTLP receiver and the
// Collector's exporter make them (otlptranslator's own cases): units
// spelled out, _total for monotonic sums only, _ratio for 1 on gauges.
func TestFamilyNames(t *testing.T) {
	f := func(name, unit, typ string, monotonic bool, want string, kinds ...string) {
		t.Helper()
		fam, err := newFamily(name, unit, typ, monotonic, "")
		if err != nil {
			t.Fatal(err)
		}
		if fam.prom != want {
			t.Errorf("%s %s %s: %s, want %s", name, unit, typ, fam.prom, want)
		}
		var got []string
		for _, k := range fam.kinds() {
			got = append(got, k.name)
		}
		if len(kinds) > 0 && !slices.Equal(got, kinds) {
			t.Errorf("%s: series %v, want %v", name, got, kinds)
		}
	}
	f("http.server.request.duration", "s", "histogram", false, "http_server_request_duration_seconds",
		"http_server_request_duration_seconds_bucket", "http_server_request_duration_seconds_sum", "http_server_request_duration_seconds_count")
	f("system.memory.usage", "By", "sum", false, "system_memory_usage_bytes", "system_memory_usage_bytes")
	f("requests", "1", "sum", true, "requests_total")
	f("cpu.utilization", "1", "gauge", false, "cpu_utilization_ratio")
	f("network.io", "By/s", "gauge", false, "network_io_bytes_per_second")
	f("rpc.latency", "ms", "summary", false, "rpc_latency_milliseconds", "rpc_latency_milliseconds", "rpc_latency_milliseconds_sum", "rpc_latency_milliseconds_count")
	f("gen_ai.client.token.usage", "{token}", "histogram", false, "gen_ai_client_token_usage")
}

// TestSeriesLabels: labels as Prometheus's OTLP receiver builds them
// with every resource attribute promoted (prometheusremotewrite
// helper.go createAttributes).
func TestSeriesLabels(t *testing.T) {
	f := func(res, point, tenant, want string) {
		t.Helper()
		got, err := seriesLabels(res, point, "scope", "", "{}", tenant)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("%s %s:\n got  %s\n want %s", res, point, got, want)
		}
	}
	// job is service.namespace/service.name, instance service.instance.id;
	// values keep their OTLP type's text (AsString).
	f(`{"service.name":"api","service.namespace":"shop","service.instance.id":"i-1"}`, `{"http.status_code":200,"ok":true,"ratio":0.5,"tags":["a","b"]}`, "",
		`{http_status_code="200", instance="i-1", job="shop/api", ok="true", otel_scope_name="scope", ratio="0.5", service_instance_id="i-1", service_name="api", service_namespace="shop", tags="[\"a\",\"b\"]"}`)
	// Attributes whose names escape alike are joined in key order; a
	// point attribute wins over the resource's of the same label.
	f(`{"host.name":"r","service.name":"api"}`, `{"a.b":"1","a_b":"2","host_name":"p"}`, "",
		`{a_b="1;2", host_name="p", job="api", otel_scope_name="scope", service_name="api"}`)
	// Without service.name there is no job; an operator's read keeps the tenant.
	f(`{}`, `{"9lives":"x","__":"y"}`, "team-a", `{__tenant_id__="team-a", key_9lives="x", otel_scope_name="scope"}`)
}
