package prom

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/labels"
	"go.opentelemetry.io/collector/pdata/pcommon"

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
	// Whether no point has a sum (a histogram's is optional), and
	// whether none has quantiles: their series are not served.
	noSum, noQuantiles bool
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
// a histogram as _bucket{le}, _sum (when a point has a sum) and _count,
// a summary as its quantiles (when a point has any), _sum and _count
// (prometheusremotewrite/helper.go addHistogramDataPoints: "If the sum
// is unset, it indicates the _sum metric point should be omitted";
// addSummaryDataPoints, a series per quantile).
func (f *family) kinds() []namedKind {
	var out []namedKind
	switch f.typ {
	case "histogram":
		out = append(out, namedKind{kindBucket, f.prom + "_bucket"})
		if !f.noSum {
			out = append(out, namedKind{kindSum, f.prom + "_sum"})
		}
		return append(out, namedKind{kindCount, f.prom + "_count"})
	case "summary":
		if !f.noQuantiles {
			out = append(out, namedKind{kindQuantile, f.prom})
		}
		return append(out, namedKind{kindSum, f.prom + "_sum"}, namedKind{kindCount, f.prom + "_count"})
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
// with promote_all_resource_attributes and promote_scope_metadata on
// (prometheusremotewrite/helper.go createAttributes, metrics_to_prw.go
// setResourceContext, setScopeContext), from JSON objects of attributes
// in the order received:
//   - the point's attributes sorted by key, names escaped, values as
//     pdata's AsString; attributes whose names escape alike joined with
//     ";" in key order, onto a value that is not empty (addAttributes);
//   - the resource's attributes, in the resource's order, the last of
//     those escaping alike winning (PromoteResourceAttributes
//     addPromotedAttributes), on labels the point left empty;
//   - job (service.namespace/service.name) and instance
//     (service.instance.id), when not empty;
//   - for a scope with a name only: its attributes as otel_scope_<key>,
//     in its order, then otel_scope_name and otel_scope_version.
//
// An empty label is no label. tenant, when not "", is the row's tenant
// for a scope reading every tenant, kept apart as Grafana Mimir's tenant
// federation does (__tenant_id__, grafana/mimir
// pkg/querier/tenantfederation), so that two tenants' series never merge.
func seriesLabels(resourceJSON, pointJSON, scopeName, scopeVersion, scopeJSON, tenant string) (labels.Labels, error) {
	point, err := otel.AttributesFromJSON([]byte(pointJSON))
	if err != nil {
		return labels.EmptyLabels(), fmt.Errorf("point attributes: %w", err)
	}
	res, err := otel.AttributesFromJSON([]byte(resourceJSON))
	if err != nil {
		return labels.EmptyLabels(), fmt.Errorf("resource attributes: %w", err)
	}
	set := map[string]string{}
	addAttributes(set, point, nil)
	promoted := map[string]string{}
	for k, v := range res.All() {
		if name, err := labelNamer.Build(k); err == nil {
			promoted[name] = v.AsString() // the last wins
		}
	}
	for name, v := range promoted {
		if set[name] == "" {
			set[name] = v
		}
	}
	setJobInstance(set, res)
	if scopeName != "" {
		scope, err := otel.AttributesFromJSON([]byte(scopeJSON))
		if err != nil {
			return labels.EmptyLabels(), fmt.Errorf("scope attributes: %w", err)
		}
		for k, v := range scope.All() {
			if name, err := labelNamer.Build("otel_scope_" + k); err == nil {
				set[name] = v.AsString()
			}
		}
		set["otel_scope_name"] = scopeName
		set["otel_scope_version"] = scopeVersion
	}
	return build(set, tenant), nil
}

// setJobInstance sets job (service.namespace/service.name) and instance
// (service.instance.id) from the resource's attributes, each only when
// not empty (helper.go createAttributes: `if
// c.resourceLabels.jobLabel != ""`).
func setJobInstance(set map[string]string, res pcommon.Map) {
	if name, ok := res.Get("service.name"); ok {
		job := name.AsString()
		if ns, ok := res.Get("service.namespace"); ok {
			job = ns.AsString() + "/" + job
		}
		if job != "" {
			set["job"] = job
		}
	}
	if inst, ok := res.Get("service.instance.id"); ok && inst.AsString() != "" {
		set["instance"] = inst.AsString()
	}
}

// build is the labels of set, with tenant's when not "": an empty label
// is no label, in Prometheus.
func build(set map[string]string, tenant string) labels.Labels {
	if tenant != "" {
		set[tenantLabel] = tenant
	}
	b := labels.NewScratchBuilder(len(set))
	for name, v := range set {
		if v != "" {
			b.Add(name, v)
		}
	}
	b.Sort()
	return b.Labels()
}

// tenantLabel names each series's tenant for a scope reading every
// tenant.
const tenantLabel = "__tenant_id__"

// addAttributes adds attrs but those named in ignore to set, in key
// order, names escaped; the value of an attribute whose name escapes as
// an earlier one's is joined to that one's with ";", when that is not
// empty (helper.go createAttributes).
func addAttributes(set map[string]string, attrs pcommon.Map, ignore []string) {
	keys := make([]string, 0, attrs.Len())
	for k := range attrs.All() {
		if !slices.Contains(ignore, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		name, err := labelNamer.Build(k)
		if err != nil {
			continue // an attribute of underscores alone makes no label
		}
		v, _ := attrs.Get(k)
		if old := set[name]; old != "" {
			set[name] = old + ";" + v.AsString()
		} else {
			set[name] = v.AsString()
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
