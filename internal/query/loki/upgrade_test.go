package loki

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestRetryAcrossTheUpgradeIsOneRecord: a record whose time has
// nanoseconds below the microsecond, loaded once before time_unix_nano
// existed (the column null: its time is the microsecond column's) and
// again after (a client's retry, or Kafka's redelivery, across the
// upgrade), is one record: counted once, listed once.
func TestRetryAcrossTheUpgradeIsOneRecord(t *testing.T) {
	rec := lakeRecords[0] // at t0 + 1s + 123ns
	l := newLake(t)
	l.load(t, []string{"a", "a"}, [][]byte{message(t, rec), message(t, rec)})
	if _, err := l.sink.DB().ExecContext(context.Background(),
		`UPDATE otel_logs SET time_unix_nano = NULL WHERE rowid = (SELECT min(rowid) FROM otel_logs)`); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := Register(mux, Options{Reader: l.reader, Tenants: tenancy.Resolver{Required: true}, Version: "test", Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	v := window(`sum(count_over_time({service_name="checkout"}[10s]))`, "step", "10s", "end", ns(t0.Add(10*time.Second)))
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", v))
	if got := seriesValues(frames)["map[]"]; len(got) != 1 || got[0] != 1 {
		t.Errorf("count_over_time: %v, want [1]: the record once", seriesValues(frames))
	}
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="checkout"}`)))
	n := 0
	for _, f := range frames {
		n += len(f.lines)
	}
	if n != 1 {
		t.Errorf("log query: %d lines, want the record once", n)
	}
}

// TestEmptyServiceNameMatcher: a record whose resource names no service
// is in the stream service_name="unknown_service" (Loki's default); a
// matcher service_name="" selects streams without that label, which
// every stream has, so it selects nothing, as Loki answers. The
// matcher pushed down to the service_name column (empty for no service)
// selected the record, under a label that contradicts the matcher.
func TestEmptyServiceNameMatcher(t *testing.T) {
	srv := serverOf(t, []record{{tenant: "a", resource: map[string]string{"k8s.namespace.name": "prod"}, at: time.Second, body: "no service"}})
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{k8s_namespace_name="prod", service_name=""}`)))
	for _, f := range frames {
		if len(f.lines) > 0 {
			t.Fatalf(`{service_name=""} answered %q with labels %v`, f.lines, f.labels)
		}
	}
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{k8s_namespace_name="prod", service_name="unknown_service"}`)))
	if len(frames) == 0 || len(frames[0].lines) != 1 {
		t.Fatalf(`{service_name="unknown_service"}: %+v`, frames)
	}
}

// TestServiceNameDiscoveredFromTheResource: a resource without
// service.name but with a container or job name (a Collector's filelog
// and k8sattributes without a service) is the stream of that name, as
// Loki's OTLP ingestion names it (pkg/loghttp/push/otlplabels/labels.go
// ResourceAttrsToStreamLabels: the first of discover_service_name's
// labels among the stream labels, pkg/validation/limits.go: …
// container_name, k8s_container_name, …, k8s_job_name; unknown_service
// only when none is there). Grafana's Logs Drilldown lists services by
// service_name.
func TestServiceNameDiscoveredFromTheResource(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"k8s.namespace.name": "prod", "k8s.container.name": "nginx"}, at: time.Second, body: "GET /"},
		{tenant: "a", resource: map[string]string{"k8s.namespace.name": "prod", "k8s.job.name": "backup", "k8s.container.name": "backup-c"}, at: 2 * time.Second, body: "done"},
		{tenant: "a", resource: map[string]string{"k8s.namespace.name": "prod", "k8s.job.name": "cleanup"}, at: 3 * time.Second, body: "cleaned"},
		{tenant: "a", resource: map[string]string{"k8s.namespace.name": "prod"}, at: 4 * time.Second, body: "orphan"},
	})
	var values struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/label/service_name/values", window("")), &values); err != nil {
		t.Fatal(err)
	}
	if want := []string{"backup-c", "cleanup", "nginx", "unknown_service"}; !slices.Equal(values.Data, want) {
		t.Fatalf("service_name values %q, want %q", values.Data, want)
	}
	for sel, want := range map[string]string{`{service_name="nginx"}`: "GET /", `{service_name="cleanup"}`: "cleaned", `{service_name="unknown_service"}`: "orphan"} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(sel)))
		if len(frames) != 1 || !slices.Equal(frames[0].lines, []string{want}) {
			t.Errorf("%s: %+v, want %q", sel, frames, want)
		}
	}
}
