package tempo

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func (f *fixture) json(tenant, path string, into any) int {
	f.t.Helper()
	rec := f.get(tenant, path, "")
	if rec.Code == 200 {
		if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
			f.t.Fatalf("%s: %v %s", path, err, rec.Body)
		}
	}
	return rec.Code
}

// TestTags: v1 lists the span and resource attribute names (intrinsics
// with scope=intrinsic alone), v2 by scope with the intrinsics first;
// each tenant's names alone.
func TestTags(t *testing.T) {
	f := newFixture(t)
	var v1 struct {
		TagNames []string `json:"tagNames"`
	}
	if code := f.json("a", "/api/search/tags", &v1); code != 200 {
		t.Fatalf("v1 tags: %d", code)
	}
	if want := []string{"db.system", "host", "http.method", "http.status_code", "sampled", "service.name", "weight"}; !slices.Equal(v1.TagNames, want) {
		t.Fatalf("v1 tags %q", v1.TagNames)
	}
	f.json("b", "/api/search/tags?scope=span", &v1)
	if want := []string{"http.method", "secret.key"}; !slices.Equal(v1.TagNames, want) {
		t.Fatalf("tenant b's span tags %q", v1.TagNames)
	}
	v1.TagNames = nil
	f.json("a", "/api/search/tags?scope=intrinsic", &v1)
	if !slices.Contains(v1.TagNames, "rootServiceName") || slices.Contains(v1.TagNames, "host") {
		t.Fatalf("intrinsic tags %q", v1.TagNames)
	}
	var v2 struct {
		Scopes []struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		} `json:"scopes"`
	}
	f.json("a", "/api/v2/search/tags", &v2)
	var got []string
	for _, s := range v2.Scopes {
		got = append(got, s.Name+":"+strings.Join(s.Tags, ","))
	}
	if len(got) != 3 || !strings.HasPrefix(got[0], "intrinsic:duration,name,status") ||
		got[1] != "resource:host,service.name" || got[2] != "span:db.system,http.method,http.status_code,sampled,weight" {
		t.Fatalf("v2 tags %q", got)
	}
	f.json("a", "/api/v2/search/tags?scope=resource", &v2)
	if len(v2.Scopes) != 1 || v2.Scopes[0].Name != "resource" {
		t.Fatalf("v2 resource tags %+v", v2.Scopes)
	}
	// q narrows the spans read.
	f.json("a", "/api/v2/search/tags?scope=span&q="+url.QueryEscape(`{ resource.service.name = "payments" }`), &v2)
	if got := v2.Scopes[0].Tags; !slices.Equal(got, []string{"http.method", "http.status_code"}) {
		t.Fatalf("v2 tags of payments %q", got)
	}
	// A bad scope is 400; a q that does not parse is not (it filters
	// nothing: TestTagQueryLenient).
	if rec := f.get("a", "/api/search/tags?scope=bogus", ""); rec.Code != 400 {
		t.Fatalf("scope=bogus: %d", rec.Code)
	}
	for _, p := range []string{"/api/search/tags", "/api/v2/search/tags"} {
		if rec := f.get("", p, ""); rec.Code != 401 {
			t.Fatalf("%s without a tenant: %d", p, rec.Code)
		}
	}
}

// TestTagValues: v2 answers typed values of an attribute or intrinsic
// named as TraceQL, the tag URL-encoded once (a twice-encoded one is
// 400, as Tempo answers it); v1 string values of a plain name; each
// tenant's values alone.
func TestTagValues(t *testing.T) {
	f := newFixture(t)
	v2 := func(tenant, tag, query string) []string {
		t.Helper()
		var out struct {
			TagValues []struct{ Type, Value string } `json:"tagValues"`
		}
		path := "/api/v2/search/tag/" + url.PathEscape(tag) + "/values" + query
		if code := f.json(tenant, path, &out); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		var vs []string
		for _, v := range out.TagValues {
			vs = append(vs, v.Type+":"+v.Value)
		}
		return vs
	}
	for _, c := range []struct {
		tenant, tag, query string
		want               []string
	}{
		{"a", "resource.service.name", "", []string{"string:db", "string:frontend", "string:payments"}},
		{"b", "resource.service.name", "", []string{"string:secret-svc"}},
		{"a", "span.http.status_code", "", []string{"int:200", "int:500"}},
		{"a", ".http.method", "", []string{"string:GET", "string:POST"}},
		{"b", ".http.method", "", []string{"string:DELETE"}},
		{"a", "span.weight", "", []string{"float:1.5"}},
		{"a", "span.sampled", "", []string{"bool:true"}},
		{"a", "name", "", []string{"string:GET /api", "string:POST /pay", "string:db query", "string:sql parse"}},
		{"a", "span:name", "?q=" + url.QueryEscape(`{ resource.service.name = "db" }`), []string{"string:db query", "string:sql parse"}},
		{"a", "rootServiceName", "", []string{"string:frontend", "string:payments"}},
		{"a", "status", "", []string{"keyword:ok", "keyword:error", "keyword:unset"}},
		{"a", "kind", "", []string{"keyword:client", "keyword:server", "keyword:producer", "keyword:consumer", "keyword:internal", "keyword:unspecified"}},
		{"a", "span.secret.key", "", nil},
		{"a", "nestedSetParent", "", nil}, // an intrinsic of numbers: no list kept, not a SQL error
		{"a", "duration", "", nil},
		{"b", "span.secret.key", "", []string{"string:b-value", "string:b-value-2"}},
		{"a", "resource.service.name", fmt.Sprintf("?start=%d&end=%d", base.Unix()+30, base.Unix()+90), []string{"string:db", "string:payments"}},
		{"a", "resource.service.name", "?limit=2", []string{"string:db", "string:frontend"}},
	} {
		if got := v2(c.tenant, c.tag, c.query); !slices.Equal(got, c.want) {
			t.Errorf("tenant %s, %s%s: got %q, want %q", c.tenant, c.tag, c.query, got, c.want)
		}
	}
	// Grafana encodes the tag once (encodeURIComponent): span:name is
	// span%3Aname; twice, span%253Aname reaches the handler as
	// span%3Aname, which is no TraceQL attribute: 400.
	if rec := f.get("a", "/api/v2/search/tag/span%3Aname/values", ""); rec.Code != 200 {
		t.Fatalf("once-encoded: %d", rec.Code)
	}
	if rec := f.get("a", "/api/v2/search/tag/name/values?limit=1x", ""); rec.Code != 400 {
		t.Fatalf("bad limit: %d", rec.Code)
	}
	if rec := f.get("a", "/api/v2/search/tag/span%253Aname/values", ""); rec.Code != 400 {
		t.Fatalf("twice-encoded: %d %s", rec.Code, rec.Body)
	}
	// A quoted attribute name with a slash, encoded once.
	if got := v2("a", `span."http.method"`, ""); !slices.Equal(got, []string{"string:GET", "string:POST"}) {
		t.Fatalf("quoted: %q", got)
	}
	var v1 struct {
		TagValues []string `json:"tagValues"`
	}
	f.json("a", "/api/search/tag/http.status_code/values", &v1)
	if !slices.Equal(v1.TagValues, []string{"200", "500"}) {
		t.Fatalf("v1 %q", v1.TagValues)
	}
	f.json("b", "/api/search/tag/service.name/values", &v1)
	if !slices.Equal(v1.TagValues, []string{"secret-svc"}) {
		t.Fatalf("v1 tenant b %q", v1.TagValues)
	}
	v1.TagValues = nil
	f.json("a", "/api/search/tag/secret.key/values", &v1)
	if len(v1.TagValues) != 0 {
		t.Fatalf("tenant a read tenant b's values %q", v1.TagValues)
	}
	for _, p := range []string{"/api/search/tag/host/values", "/api/v2/search/tag/resource.host/values"} {
		if rec := f.get("", p, ""); rec.Code != 401 {
			t.Fatalf("%s without a tenant: %d", p, rec.Code)
		}
	}
}

// TestPublic: echo and buildinfo need no tenant.
func TestPublic(t *testing.T) {
	f := newFixture(t)
	if rec := f.get("", "/api/echo", ""); rec.Code != 200 || rec.Body.String() != "echo\n" {
		t.Fatalf("echo: %d %q", rec.Code, rec.Body)
	}
	var info struct{ Version string }
	if code := f.json("", "/api/status/buildinfo", &info); code != 200 || info.Version != "v-test" {
		t.Fatalf("buildinfo: %d %+v", code, info)
	}
}

// TestTagValuesV1WellKnownTags: v1 tag values of the tags Tempo directs
// to its intrinsics answer them: name the span names, rootServiceName
// and rootName the root spans' service and name
// (tempodb/encoding/vparquet4/block_search_tags.go
// translateTagToAttribute, used by SearchTagValues), not the values of
// attributes so named, which no span here has.
func TestTagValuesV1WellKnownTags(t *testing.T) {
	f := newFixture(t)
	for tag, want := range map[string][]string{
		"name":            {"GET /api", "POST /pay", "db query", "sql parse"},
		"rootServiceName": {"frontend", "payments"},
		"rootName":        {"GET /api", "POST /pay"},
	} {
		var v1 struct {
			TagValues []string `json:"tagValues"`
		}
		if code := f.json("a", "/api/search/tag/"+tag+"/values", &v1); code != 200 || !slices.Equal(v1.TagValues, want) {
			t.Errorf("%s: %d %q, want %q", tag, code, v1.TagValues, want)
		}
	}
}
