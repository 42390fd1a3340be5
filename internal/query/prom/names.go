package prom

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tracelake/tracelake/internal/otel"
)

// Names follow Prometheus's own OTLP receiver with its default
// translation strategy (UnderscoreEscapingWithSuffixes), which is what the
// Collector's Prometheus exporter does too: otlptranslator builds metric
// names with their unit and type suffixes (_seconds, _bytes, _total) and
// label names with invalid characters escaped to _
// (open-telemetry/opentelemetry-collector-contrib
// exporter/prometheusexporter/collector.go configureMetricNamer,
// getMetricMetadata; prometheus/prometheus
// storage/remote/otlptranslator/prometheusremotewrite/helper.go). Label
// names keep runs of underscores (a__b) and a leading underscore is
// prefixed with "key" (_tag is key_tag), as Prometheus's default OTLP
// config says (config/config.go DefaultOTLPConfig:
// LabelNameUnderscoreSanitization, LabelNamePreserveMultipleUnderscores;
// metrics_to_prw.go setResourceContext builds its LabelNamer with them).
var (
	metricNamer = otlptranslator.MetricNamer{WithMetricSuffixes: true}
	labelNamer  = otlptranslator.LabelNamer{UnderscoreLabelSanitization: true, PreserveMultipleUnderscores: true}
)

// kind is which of a family's Prometheus series a series is.
type kind uint8

const (
	kindValue    kind = iota // a gauge's or a sum's value
	kindBucket               // a histogram's cumulative bucket, le
	kindSum                  // a histogram's or summary's _sum
	kindCount                // a histogram's or summary's _count
	kindQuantile             // a summary's quantile
)

// family is one OpenTelemetry metric as the table holds it (its name,
// unit, type and monotonicity), with its Prometheus name.
type family struct {
	name, unit, typ string
	monotonic       bool
	description     string
	prom            string // the Prometheus metric family name
}

// key identifies a family among the table's rows.
func (f *family) key() string {
	return f.name + "\x00" + f.unit + "\x00" + f.typ + "\x00" + strconv.FormatBool(f.monotonic)
}

// otlpType is the family's type as otlptranslator knows it, mapped as
// Prometheus's OTLP receiver maps pdata's
// (prometheusremotewrite/metrics_to_prw.go TranslatorMetricFromOtelMetric).
func otlpType(typ string, monotonic bool) otlptranslator.MetricType {
	switch typ {
	case "gauge":
		return otlptranslator.MetricTypeGauge
	case "sum":
		if monotonic {
			return otlptranslator.MetricTypeMonotonicCounter
		}
		return otlptranslator.MetricTypeNonMonotonicCounter
	case "histogram":
		return otlptranslator.MetricTypeHistogram
	case "summary":
		return otlptranslator.MetricTypeSummary
	case "exponential_histogram":
		return otlptranslator.MetricTypeExponentialHistogram
	}
	return otlptranslator.MetricTypeUnknown
}

// newFamily names an OpenTelemetry metric.
func newFamily(name, unit, typ string, monotonic bool, description string) (*family, error) {
	prom, err := metricNamer.Build(otlptranslator.Metric{Name: name, Unit: unit, Type: otlpType(typ, monotonic)})
	if err != nil {
		return nil, fmt.Errorf("name metric %q: %w", name, err)
	}
	return &family{name: name, unit: unit, typ: typ, monotonic: monotonic, description: description, prom: prom}, nil
}

// kinds are the series a family is served as, with their metric names:
// a histogram as _bucket{le}, _sum and _count, a summary as its
// quantiles, _sum and _count (prometheusremotewrite/helper.go
// addHistogramDataPoints, addSummaryDataPoints).
func (f *family) kinds() []namedKind {
	switch f.typ {
	case "histogram":
		return []namedKind{{kindBucket, f.prom + "_bucket"}, {kindSum, f.prom + "_sum"}, {kindCount, f.prom + "_count"}}
	case "summary":
		return []namedKind{{kindQuantile, f.prom}, {kindSum, f.prom + "_sum"}, {kindCount, f.prom + "_count"}}
	}
	return []namedKind{{kindValue, f.prom}}
}

type namedKind struct {
	kind kind
	name string
}

// promType is the family's type in Prometheus's metadata: a monotonic
// sum is a counter, a non-monotonic one a gauge (collector.go convertSum).
func (f *family) promType() string {
	switch f.typ {
	case "sum":
		if f.monotonic {
			return "counter"
		}
		return "gauge"
	case "histogram", "summary", "gauge":
		return f.typ
	}
	return "unknown"
}

// seriesLabels are the labels every series of a row shares but its name
// (and le or quantile): built as Prometheus's OTLP receiver builds them
// with promote_all_resource_attributes and scope metadata on
// (prometheusremotewrite/helper.go createAttributes,
// metrics_to_prw.go setResourceContext): the point's attributes sorted by
// key, names escaped, values as pdata's AsString, and values of
// attributes whose names escape alike joined with ";" in key order; then
// the resource's attributes where no point attribute set the label; job
// (service.namespace/service.name) and instance (service.instance.id);
// otel_scope_name and otel_scope_version. tenant, when not "", is the
// row's tenant for a scope reading every tenant, kept apart as Grafana
// Mimir's tenant federation does (__tenant_id__, grafana/mimir
// pkg/querier/tenantfederation), so that two tenants' series never merge.
func seriesLabels(resourceJSON, pointJSON, scopeName, scopeVersion, tenant string) (labels.Labels, error) {
	b := labels.NewScratchBuilder(16)
	point, err := otel.AttributesFromJSON([]byte(pointJSON))
	if err != nil {
		return labels.EmptyLabels(), fmt.Errorf("point attributes: %w", err)
	}
	res, err := otel.AttributesFromJSON([]byte(resourceJSON))
	if err != nil {
		return labels.EmptyLabels(), fmt.Errorf("resource attributes: %w", err)
	}
	pointAttrs, resAttrs := map[string]string{}, map[string]string{}
	for k, v := range point.All() {
		pointAttrs[k] = v.AsString()
	}
	for k, v := range res.All() {
		resAttrs[k] = v.AsString()
	}
	set := map[string]string{}
	addAttributes(set, pointAttrs)
	promoted := map[string]string{}
	for k, v := range resAttrs {
		if name, err := labelNamer.Build(k); err == nil && set[name] == "" {
			promoted[k] = v
		}
	}
	addAttributes(set, promoted)
	if name, ok := resAttrs["service.name"]; ok {
		if ns, ok := resAttrs["service.namespace"]; ok {
			name = ns + "/" + name
		}
		set["job"] = name
	}
	if inst, ok := resAttrs["service.instance.id"]; ok {
		set["instance"] = inst
	}
	set["otel_scope_name"] = scopeName
	set["otel_scope_version"] = scopeVersion
	if tenant != "" {
		set[tenantLabel] = tenant
	}
	for name, v := range set {
		if v != "" { // an empty label is no label, in Prometheus
			b.Add(name, v)
		}
	}
	b.Sort()
	return b.Labels(), nil
}

// tenantLabel names each series's tenant for a scope reading every
// tenant.
const tenantLabel = "__tenant_id__"

// addAttributes adds attrs to set in key order, names escaped; values
// of attributes whose names escape alike are joined with ";".
func addAttributes(set, attrs map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		name, err := labelNamer.Build(k)
		if err != nil {
			continue // an attribute of underscores alone makes no label
		}
		if old, ok := set[name]; ok {
			set[name] = old + ";" + attrs[k]
		} else {
			set[name] = attrs[k]
		}
	}
}

// formatBound is an le or quantile label value, as Prometheus's OTLP
// receiver writes it (helper.go: strconv.FormatFloat(bound, 'f', -1, 64),
// "+Inf" for the last bucket).
func formatBound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// withName is base with __name__ and, when extra is set, one more label.
func withName(base labels.Labels, name, extraName, extraValue string) labels.Labels {
	b := labels.NewBuilder(base)
	b.Set(labels.MetricName, name)
	if extraName != "" {
		b.Set(extraName, extraValue)
	}
	return b.Labels()
}
