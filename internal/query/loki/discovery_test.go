package loki

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// TestServiceNameDiscoveredInResourceOrder: Loki's service name
// discovery goes through the resource's attributes in their order and
// takes the first whose stream label is one of discover_service_name's
// (pkg/loghttp/push/otlplabels/labels.go ResourceAttrsToStreamLabels:
// attrs.Range, then the list), not the first of the list: a Job's pod
// as the k8sattributes processor describes it, k8s.job.name before
// k8s.container.name, is the job's service.
func TestServiceNameDiscoveredInResourceOrder(t *testing.T) {
	ld := plog.NewLogs()
	for i, res := range [][][2]string{
		{{"k8s.namespace.name", "prod"}, {"k8s.job.name", "backup"}, {"k8s.container.name", "backup-c"}},
		{{"k8s.namespace.name", "prod"}, {"k8s.container.name", "nginx"}, {"k8s.job.name", "nginx-job"}},
	} {
		rl := ld.ResourceLogs().AppendEmpty()
		for _, kv := range res {
			rl.Resource().Attributes().PutStr(kv[0], kv[1])
		}
		lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(1 + 1000*i))))
		lr.Body().SetStr(res[1][1] + " ran")
	}
	srv := serveLogs(t, ld)

	var values struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/label/service_name/values", window("")), &values); err != nil {
		t.Fatal(err)
	}
	if want := []string{"backup", "nginx"}; !slices.Equal(values.Data, want) {
		t.Errorf("service_name values %q, want %q", values.Data, want)
	}
	for sel, want := range map[string]string{`{service_name="backup"}`: "backup ran", `{service_name="nginx"}`: "nginx ran"} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(sel)))
		if len(frames) != 1 || !slices.Equal(frames[0].lines, []string{want}) {
			t.Errorf("%s: %+v, want %q", sel, frames, want)
		}
	}
}
