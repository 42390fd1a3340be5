package loki

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/tracelake/tracelake/internal/tenancy"
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

// operatorServer serves the Loki API over records with a token reading
// every tenant ("ops"), which names none for an operator's read (every
// tenant) or one in X-Scope-OrgID for that tenant's.
func operatorServer(t *testing.T, records []record) *httptest.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("ops read=*\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := tenancy.LoadTokens(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return serverWith(t, records, tenancy.Resolver{Tokens: tokens})
}

// operatorLabel is the label of each stream's tenant in an operator's
// read (Loki's defaultTenantLabel).
const operatorLabel = "__tenant_id__"

// asOperator is the header of the operator's token.
var asOperator = []string{"Authorization", "Bearer ops"}

// TestOperatorKeepsTenantsApart: tenants a and b send the same record
// (service, time, line); an operator's read (a token reading every
// tenant, naming none) answers it once under each __tenant_id__, as
// Loki's multi-tenant querier labels every stream (grafana/loki
// pkg/querier/multi_tenant_querier.go, defaultTenantLabel); a matcher on
// __tenant_id__ selects a tenant, and the metadata routes know the
// label. A tenant's own read has no such label.
func TestOperatorKeepsTenantsApart(t *testing.T) {
	same := record{resource: map[string]string{"service.name": "checkout"}, at: time.Second,
		severity: plog.SeverityNumberInfo, body: "GET /cart status=200"}
	a, b := same, same
	a.tenant, b.tenant = "a", "b"
	onlyB := record{tenant: "b", resource: map[string]string{"service.name": "billing"}, at: 2 * time.Second,
		severity: plog.SeverityNumberError, body: "charge failed amount=12"}
	srv := operatorServer(t, []record{a, b, onlyB})

	// query_range: one entry under each tenant, never one merged.
	_, frames := decodeGrafana(t, ok(t, srv, "", "/loki/api/v1/query_range", window(`{service_name="checkout"}`), asOperator...))
	var got []string
	for i, ls := range frames[0].labels {
		got = append(got, ls[operatorLabel]+":"+frames[0].lines[i])
	}
	slices.Sort(got)
	if want := []string{"a:" + same.body, "b:" + same.body}; !slices.Equal(got, want) {
		t.Errorf("operator's checkout entries by tenant %q, want %q", got, want)
	}

	// A matcher on __tenant_id__ selects that tenant's streams alone.
	for q, want := range map[string][]string{
		`{__tenant_id__="a"}`:                            {"a:" + same.body},
		`{__tenant_id__="b", service_name=~".+"}`:        {"b:" + same.body, "b:" + onlyB.body},
		`{__tenant_id__=~"a|b", service_name="billing"}`: {"b:" + onlyB.body},
		`{__tenant_id__!="b", service_name=~".+"}`:       {"a:" + same.body},
		`{__tenant_id__="c"}`:                            nil,
	} {
		_, frames := decodeGrafana(t, ok(t, srv, "", "/loki/api/v1/query_range", window(q), asOperator...))
		var got []string
		for i, ls := range frames[0].labels {
			got = append(got, ls[operatorLabel]+":"+frames[0].lines[i])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("operator's %s: %q, want %q", q, got, want)
		}
	}

	// A metric query counts each tenant's record.
	_, frames = decodeGrafana(t, ok(t, srv, "", "/loki/api/v1/query", url.Values{
		"query": {`sum by (__tenant_id__) (count_over_time({service_name="checkout"}[1m]))`}, "time": {ns(t0.Add(time.Minute))}}, asOperator...))
	if got := seriesValues(frames); len(got) != 2 || !slices.Equal(got["map[__tenant_id__:a]"], []float64{1}) || !slices.Equal(got["map[__tenant_id__:b]"], []float64{1}) {
		t.Errorf("operator's count by tenant %v, want 1 for each of a and b", got)
	}

	// The metadata routes know the label.
	var names struct{ Data []string }
	if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/labels", window(""), asOperator...), &names); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names.Data, operatorLabel) {
		t.Errorf("operator's labels %v lack %s", names.Data, operatorLabel)
	}
	if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/label/"+operatorLabel+"/values", window(`{service_name="checkout"}`), asOperator...), &names); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names.Data, []string{"a", "b"}) {
		t.Errorf("operator's %s values %v, want [a b]", operatorLabel, names.Data)
	}
	var series struct{ Data []map[string]string }
	params := url.Values{"match[]": {`{service_name="checkout"}`}, "start": {ns(t0)}, "end": {ns(t0.Add(time.Minute))}}
	if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/series", params, asOperator...), &series); err != nil {
		t.Fatal(err)
	}
	var tenants []string
	for _, s := range series.Data {
		tenants = append(tenants, s[operatorLabel])
	}
	slices.Sort(tenants)
	if !slices.Equal(tenants, []string{"a", "b"}) {
		t.Errorf("operator's checkout series %v, want one of each tenant", series.Data)
	}
	var stats struct{ Streams, Entries, Bytes int }
	if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/index/stats", window(`{service_name="checkout"}`), asOperator...), &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Streams != 2 || stats.Entries != 2 || stats.Bytes != 2*len(same.body) {
		t.Errorf("operator's checkout stats %+v, want 2 streams, 2 entries, %d bytes", stats, 2*len(same.body))
	}
	if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/index/stats", window(`{__tenant_id__="a"}`), asOperator...), &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Streams != 1 || stats.Entries != 1 {
		t.Errorf("operator's stats of tenant a %+v, want 1 stream, 1 entry", stats)
	}
	_, frames = decodeGrafana(t, ok(t, srv, "", "/loki/api/v1/index/volume", window(`{service_name=~".+"}`, "targetLabels", operatorLabel), asOperator...))
	if got := seriesValues(frames); len(got) != 2 || !slices.Equal(got["map[__tenant_id__:a]"], []float64{float64(len(same.body))}) ||
		!slices.Equal(got["map[__tenant_id__:b]"], []float64{float64(len(same.body) + len(onlyB.body))}) {
		t.Errorf("operator's volume by tenant %v", got)
	}
	var detected struct {
		DetectedLabels []struct {
			Label       string
			Cardinality int
		}
	}
	if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/detected_labels", window(""), asOperator...), &detected); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(detected.DetectedLabels, func(l struct {
		Label       string
		Cardinality int
	}) bool {
		return l.Label == operatorLabel && l.Cardinality == 2
	}) {
		t.Errorf("operator's detected labels %+v lack %s of 2 values", detected.DetectedLabels, operatorLabel)
	}
	for tenant, want := range map[string]bool{"a": false, "b": true} {
		var fields struct{ Fields []struct{ Label string } }
		if err := json.Unmarshal(ok(t, srv, "", "/loki/api/v1/detected_fields", window(`{__tenant_id__="`+tenant+`"}`), asOperator...), &fields); err != nil {
			t.Fatal(err)
		}
		if got := slices.ContainsFunc(fields.Fields, func(f struct{ Label string }) bool { return f.Label == "amount" }); got != want {
			t.Errorf("operator's detected fields of tenant %s %+v: amount (b's line's field) %v, want %v", tenant, fields.Fields, got, want)
		}
	}

	// A tenant's own read: its record alone, no tenant label anywhere,
	// and __tenant_id__ a label no stream has.
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name=~".+"}`), asOperator...))
	if len(frames[0].lines) != 1 || frames[0].lines[0] != same.body {
		t.Errorf("tenant a's lines %q, want its one record", frames[0].lines)
	}
	for _, ls := range frames[0].labels {
		if _, ok := ls[operatorLabel]; ok {
			t.Errorf("tenant a's stream %v holds %s", ls, operatorLabel)
		}
	}
	for _, path := range []string{"/loki/api/v1/labels", "/loki/api/v1/series", "/loki/api/v1/detected_labels"} {
		p := window("")
		if path == "/loki/api/v1/series" {
			p = params
		}
		if body := ok(t, srv, "a", path, p, asOperator...); strings.Contains(string(body), operatorLabel) {
			t.Errorf("tenant a's %s names %s: %s", path, operatorLabel, body)
		}
	}
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{__tenant_id__="a"}`), asOperator...))
	if len(frames[0].lines) != 0 {
		t.Errorf("tenant a's {__tenant_id__=\"a\"} selects %q: no stream of a tenant's own read has the label", frames[0].lines)
	}
}

// TestSeveralOrEmptyTenantsRefused: a request naming several tenants
// (X-Scope-OrgID twice) is refused 400, never answered with the first
// one's streams, nor is an X-Scope-OrgID sent empty read as naming none:
// which tenant it meant is not for the server to guess, as on the OTLP
// receivers and Flight SQL.
func TestSeveralOrEmptyTenantsRefused(t *testing.T) {
	srv := server(t)
	for name, values := range map[string][]string{
		"two tenants":   {"a", "b"},
		"one twice":     {"a", "a"},
		"empty":         {""},
		"empty, then a": {"", "a"},
	} {
		req, err := http.NewRequest("GET", srv.URL+"/loki/api/v1/query_range?"+window(`{service_name=~".+"}`).Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header["X-Scope-Orgid"] = values
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s (%q): %d, want 400: %s", name, values, resp.StatusCode, body)
		}
		if strings.Contains(string(body), "checkout") || strings.Contains(string(body), "billing") {
			t.Errorf("%s (%q): answered with a tenant's streams: %s", name, values, body)
		}
	}
}
