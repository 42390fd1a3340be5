package loki

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryRouteIsScoped: every data and metadata route answers the
// caller's tenant alone (tenant b's service, namespace and line never
// reach tenant a, nor a's reach b), and refuses a request naming none.
func TestEveryRouteIsScoped(t *testing.T) {
	srv := server(t)
	all := window(`{service_name=~".+"}`)
	routes := []struct {
		path   string
		params url.Values
	}{
		{"/loki/api/v1/query_range", all},
		{"/loki/api/v1/query", url.Values{"query": {`sum by (service_name, k8s_namespace_name) (count_over_time({service_name=~".+"}[1m]))`}, "time": {ns(t0.Add(time.Minute))}}},
		{"/loki/api/v1/query_range", window(`{k8s_namespace_name=~".+"} |= "payment"`)},
		{"/loki/api/v1/labels", window("")},
		{"/loki/api/v1/label", window("")},
		{"/loki/api/v1/label/service_name/values", window("")},
		{"/loki/api/v1/label/k8s_namespace_name/values", window("")},
		{"/loki/api/v1/series", url.Values{"match[]": {`{service_name=~".+"}`}, "start": all["start"], "end": all["end"]}},
		{"/loki/api/v1/index/stats", all},
		{"/loki/api/v1/detected_labels", window("")},
		{"/loki/api/v1/detected_fields", all},
		{"/loki/api/v1/index/volume", window(`{service_name=~".+"}`, "targetLabels", "service_name,k8s_namespace_name")},
		{"/loki/api/v1/index/volume_range", window(`{service_name=~".+"}`, "targetLabels", "service_name,k8s_namespace_name", "step", "2s")},
	}
	secrets := map[string][]string{"a": {"billing", "secret-ns", "secret-b"}, "b": {"checkout", "search", "prod", "/cart"}}
	own := map[string]string{"a": "checkout", "b": "billing"}
	for _, r := range routes {
		status, _ := get(t, srv, "", r.path, r.params)
		if status != http.StatusUnauthorized {
			t.Errorf("%s without a tenant: %d, want 401", r.path, status)
		}
		for tenant, hidden := range secrets {
			body := string(ok(t, srv, tenant, r.path, r.params))
			for _, s := range hidden {
				if strings.Contains(body, s) {
					t.Errorf("%s for tenant %s holds %q: %s", r.path, tenant, s, body)
				}
			}
			if r.path != "/loki/api/v1/labels" && r.path != "/loki/api/v1/label" && r.path != "/loki/api/v1/index/stats" && r.path != "/loki/api/v1/detected_labels" && r.path != "/loki/api/v1/detected_fields" &&
				!strings.Contains(r.path, "k8s_namespace_name") && !strings.Contains(r.params.Get("query"), "payment") &&
				!strings.Contains(body, own[tenant]) {
				t.Errorf("%s for tenant %s lacks its own %q: %s", r.path, tenant, own[tenant], body)
			}
		}
	}
}

// TestLabelsAndSeries: the labels API lists the stream labels (service,
// level, indexed resource attributes), not structured metadata; values
// and series follow a selector.
func TestLabelsAndSeries(t *testing.T) {
	srv := server(t)
	var names struct{ Data []string }
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/labels", window("")), &names); err != nil {
		t.Fatal(err)
	}
	if want := []string{"detected_level", "k8s_namespace_name", "service_name"}; !slices.Equal(names.Data, want) {
		t.Fatalf("labels %v, want %v", names.Data, want)
	}
	var values struct{ Data []string }
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/label/detected_level/values", window(`{service_name="checkout"}`)), &values); err != nil {
		t.Fatal(err)
	}
	if want := []string{"error", "info", "warn"}; !slices.Equal(values.Data, want) {
		t.Fatalf("values %v, want %v", values.Data, want)
	}
	var series struct{ Data []map[string]string }
	params := url.Values{"match[]": {`{service_name="search"}`, `{detected_level="error"}`}, "start": {ns(t0)}, "end": {ns(t0.Add(time.Minute))}}
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/series", params), &series); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(series.Data, func(x, y map[string]string) int { return strings.Compare(x["service_name"], y["service_name"]) })
	if len(series.Data) != 2 || series.Data[0]["detected_level"] != "error" || series.Data[1]["service_name"] != "search" {
		t.Fatalf("series %v", series.Data)
	}
	var detected struct {
		DetectedLabels []struct {
			Label       string
			Cardinality int
		}
	}
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/detected_labels", window("")), &detected); err != nil {
		t.Fatal(err)
	}
	if d := detected.DetectedLabels; len(d) != 3 || d[0].Label != "detected_level" || d[0].Cardinality != 3 || d[2].Label != "service_name" || d[2].Cardinality != 2 {
		t.Fatalf("detected labels %+v", d)
	}
	// Outside the range, nothing.
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/labels", url.Values{"start": {ns(t0.Add(time.Hour))}, "end": {ns(t0.Add(2 * time.Hour))}}), &names); err != nil {
		t.Fatal(err)
	}
	if len(names.Data) != 0 {
		t.Fatalf("labels of an empty range: %v", names.Data)
	}
}

// TestIndexStatsAndVolume: stats count the distinct records and their
// bytes; volume sums bytes by the selector's labels, largest first.
func TestIndexStatsAndVolume(t *testing.T) {
	srv := server(t)
	var stats struct{ Streams, Chunks, Bytes, Entries int }
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/index/stats", window(`{service_name="checkout"}`)), &stats); err != nil {
		t.Fatal(err)
	}
	wantBytes := len(lakeRecords[0].body) + len(lakeRecords[1].body) + len(lakeRecords[2].body)
	if stats.Streams != 3 || stats.Entries != 3 || stats.Bytes != wantBytes {
		t.Fatalf("stats %+v, want 3 streams, 3 entries, %d bytes", stats, wantBytes)
	}
	typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/index/volume", window(`{service_name=~".+"}`)))
	if typ != "vector" || len(frames) != 2 || frames[0].metric["service_name"] != "checkout" || frames[0].values[0] != float64(wantBytes) ||
		frames[1].metric["service_name"] != "search" || len(frames[0].metric) != 1 {
		t.Fatalf("volume %s %+v", typ, frames)
	}
	// By label name: each label's bytes, as {name=""}.
	typ, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/index/volume", window(`{service_name="checkout"}`, "aggregateBy", "labels")))
	if got := seriesValues(frames); typ != "vector" || len(got) != 3 || got["map[k8s_namespace_name:]"][0] != float64(wantBytes) {
		t.Fatalf("volume by labels %s %v", typ, got)
	}
	// By step: checkout's record at 1s in the step ending at 2s, those
	// at 2s and 3s in the one ending at 4s, each stamped a millisecond
	// before its end, as Loki's volume middleware stamps a step
	// (TestVolumeStepsAsLokiStampsThem).
	typ, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/index/volume_range", window(`{service_name="checkout"}`, "step", "2s")))
	if typ != "matrix" || len(frames) != 1 || !slices.Equal(frames[0].values, []float64{float64(len(lakeRecords[0].body)), float64(len(lakeRecords[1].body) + len(lakeRecords[2].body))}) ||
		!frames[0].times[0].Equal(t0.Add(1999*time.Millisecond)) || !frames[0].times[1].Equal(t0.Add(3999*time.Millisecond)) {
		t.Fatalf("volume_range %s %+v", typ, frames)
	}
}
