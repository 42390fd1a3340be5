package prom

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/prometheus/common/model"
)

// TestServiceNamePushdownKeepsPointAttributes: a service_name matcher is
// pushed down to the service_name column, which holds the resource's
// service.name; a series whose label comes from a point attribute, which
// wins over the resource's, must still be found, with or without
// service.name on its resource; one of another service must not.
func TestServiceNamePushdownKeepsPointAttributes(t *testing.T) {
	db := newTable(t)
	md := pmetric.NewMetrics()
	for _, svc := range []string{"", "other", "third"} {
		rm := md.ResourceMetrics().AppendEmpty()
		if svc != "" {
			rm.Resource().Attributes().PutStr("service.name", svc)
		}
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("queue.depth")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(0))
		dp.SetIntValue(5)
		if svc != "third" {
			dp.Attributes().PutStr("service.name", "worker")
		}
	}
	load(t, db, "team-a", md)
	f := serve(t, db)
	v, _, _, err := f.client(t, "ta", "").Query(context.Background(), `queue_depth{service_name="worker"}`, t0)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, s := range v.(model.Vector) {
		jobs = append(jobs, string(s.Metric["job"]))
	}
	slices.Sort(jobs)
	if !slices.Equal(jobs, []string{"", "other"}) {
		t.Fatalf("got %v, want the series of the resource without service.name and of other's", v)
	}
}
