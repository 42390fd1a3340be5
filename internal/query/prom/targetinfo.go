package prom

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// target_info: Prometheus's OTLP receiver writes, for each resource with
// attributes besides the identifying ones, a gauge of 1 labelled with
// them, job and instance (prometheusremotewrite/helper.go
// addResourceTargetInfo, on by default: write_otlp_handler.go leaves
// DisableTargetInfo false). Grafana joins resource attributes from it.
const (
	targetInfoName = "target_info"
	targetInfoHelp = "Target metadata" // helper.go addResourceTargetInfo
)

// identifying are the resource attributes that make job and instance,
// and no label of target_info (helper.go addResourceTargetInfo).
var identifying = []string{"service.namespace", "service.name", "service.instance.id"}

// targetInfoLabels are the labels of a resource's target_info series,
// as Prometheus's OTLP receiver makes them (helper.go
// addResourceTargetInfo): the resource's attributes but the identifying
// ones, joined as a point's are (addAttributes), job and instance, no
// scope labels; ok is false for a resource with no other attribute, or
// neither job nor instance, which has no target_info.
func targetInfoLabels(resourceJSON, tenant string) (_ labels.Labels, ok bool, _ error) {
	res, err := otel.AttributesFromJSON([]byte(resourceJSON))
	if err != nil {
		return labels.EmptyLabels(), false, fmt.Errorf("resource attributes: %w", err)
	}
	others := res.Len()
	for _, k := range identifying {
		if _, ok := res.Get(k); ok {
			others--
		}
	}
	if others == 0 {
		return labels.EmptyLabels(), false, nil
	}
	set := map[string]string{}
	addAttributes(set, res, identifying)
	setJobInstance(set, res)
	if set["job"] == "" && set["instance"] == "" {
		return labels.EmptyLabels(), false, nil
	}
	set[labels.MetricName] = targetInfoName
	return build(set, tenant), true, nil
}

// targetInfoSQL reads the distinct resources with points in a time range
// ($1, $2: microseconds), any metric's (Prometheus takes the earliest and
// the latest time of every metric of the resource, refused ones too:
// metrics_to_prw.go FromMetrics), and the tenant for a scope reading
// every tenant; with points, then the distinct times (ms) of the
// resource's points, in order.
//
// The samples: Prometheus writes one at the earliest time of each
// request's points of the resource, every lookback delta / 2 after it,
// and one at the latest. An exporter's request carries each series at
// one time, its export's, so Prometheus's samples are at the times of
// the resource's points; which is what is served: a sample at each
// distinct time (ms) a point of the resource has. A request carrying a
// range of times (a backfill) would have its gaps filled by Prometheus,
// not here.
func targetInfoSQL(table string, all, points bool) string {
	tenant, group := "''", "resource_attributes"
	if all {
		tenant, group = "tenant_id", "resource_attributes, tenant_id"
	}
	times := ""
	if points {
		times = ", list(DISTINCT epoch_ms(time) ORDER BY epoch_ms(time))"
	}
	return `SELECT resource_attributes::VARCHAR, ` + tenant + times + `
		FROM ` + sqltext.Ident(table) + `
		WHERE time >= make_timestamp($1) AND time <= make_timestamp($2) AND resource_attributes IS NOT NULL
		GROUP BY ` + group
}

// readTargetInfo finds the target_info series matching ms in
// [mint, maxt], with their samples when withPoints is set, in no order.
func (q *querier) readTargetInfo(ctx context.Context, mint, maxt int64, withPoints bool, ms []*labels.Matcher) ([]*floatSeries, error) {
	from, to := timeRange(mint, maxt)
	var out []*floatSeries
	err := readRows(ctx, q.reader, q.scope, targetInfoSQL(q.table, q.scope.All, withPoints), []any{from, to}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			lset, ok, err := targetInfoLabels(orEmptyObject(stringAt(rec.Column(0), i)), stringAt(rec.Column(1), i))
			if err != nil {
				return err
			}
			if !ok || !matchesAll(ms, lset) {
				continue
			}
			s := &floatSeries{lset: lset}
			if withPoints {
				times, start, end := listAt(rec.Column(2), i)
				ts := times.(*array.Int64).Int64Values()[start:end]
				s.pts = make(points, 0, len(ts))
				for _, t := range ts {
					s.pts = append(s.pts, promql.FPoint{T: t, F: 1})
				}
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// hasTargetInfo says whether a resource with points in the querier's
// range has target_info (for the metric names and metadata, which are
// otherwise read from the families alone).
func (q *querier) hasTargetInfo(ctx context.Context) (bool, error) {
	series, err := q.readTargetInfo(ctx, q.mint, q.maxt, false, nil)
	return len(series) > 0, err
}
