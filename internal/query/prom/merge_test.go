package prom

import (
	"context"
	"testing"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestRowsOfTheSameLabelsAreOneSeries: resources whose attributes the
// table holds in another order are two rows but one series; so are
// metrics whose names escape alike.
func TestRowsOfTheSameLabelsAreOneSeries(t *testing.T) {
	db := newTable(t)
	md := pmetric.NewMetrics()
	for i, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		rm := md.ResourceMetrics().AppendEmpty()
		for _, k := range order {
			rm.Resource().Attributes().PutStr(k, "v")
		}
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName([]string{"queue.depth", "queue_depth"}[i])
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(i))
		dp.SetIntValue(int64(i))
	}
	load(t, db, "team-a", md)
	c := serve(t, db).client(t, "ta", "")
	for q, want := range map[string]model.SampleValue{"count(queue_depth)": 1, "count_over_time(queue_depth[1m])": 2} {
		v, _, _, err := c.Query(context.Background(), q, t0.Add(step15))
		if err != nil {
			t.Fatal(err)
		}
		if vec := v.(model.Vector); len(vec) != 1 || vec[0].Value != want {
			t.Errorf("%s: %v, want %v", q, vec, want)
		}
	}
}
