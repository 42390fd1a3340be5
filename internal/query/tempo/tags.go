package tempo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/query/traceql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// intrinsicTags are the intrinsic scope's tags: those of Tempo's list
// (pkg/search/util.go GetVirtualIntrinsicValues) that tracelake's TraceQL
// answers, unscoped and scoped.
var intrinsicTags = []string{"duration", "name", "status", "statusMessage", "kind", "rootServiceName", "rootName",
	"traceDuration", "span:status", "span:statusMessage", "span:duration", "span:name", "span:kind",
	"trace:rootName", "trace:rootService", "trace:duration"}

// maxTagValues bounds a tag's values when the request sets no limit.
const maxTagValues = 10_000

// tagsRequest is what a tags or tag values request may narrow by: the
// window (start, end: Unix seconds), q's condition groups and a limit.
type tagsRequest struct {
	startMicros, endMicros int64
	groups                 []traceql.Group // nil for every span
	limit                  int
}

// parseTagsRequest reads start, end, q and limit as pkg/api/search_tags.go
// does: a limit of 0 is the default; no "start before end", the
// frontend checks the range's length alone (modules/frontend/
// tag_sharder.go RoundTrip, its unsigned end-start passing the maximum
// when end is before start); q as traceql.ExtractConditionGroups reads
// it (traceql.TagFilter).
func parseTagsRequest(r *http.Request) (tagsRequest, error) {
	v := r.URL.Query()
	req := tagsRequest{limit: maxTagValues}
	var start, end uint32
	for _, f := range []struct {
		name string
		dst  *uint32
	}{{"start", &start}, {"end", &end}} {
		if s := v.Get(f.name); s != "" {
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return req, bad("invalid %s: %v", f.name, err)
			}
			*f.dst = uint32(n)
		}
	}
	if time.Duration(end-start)*time.Second > maxSearchDuration {
		return req, bad("range specified by start and end exceeds %s. received start=%d end=%d", maxSearchDuration, start, end)
	}
	req.startMicros, req.endMicros = searchParams{start: start, end: end}.window()
	if f := traceql.TagFilter(v.Get("q")); f != nil {
		groups, ok := traceql.ConditionGroups(f.Cond)
		if !ok {
			// pkg/traceql/lenient_extract.go ErrMaxConditionGroupsPerTagQueryReached
			return req, bad("maximum condition groups reached (limit: 100). Reduce the number of OR conditions in the query")
		}
		req.groups = groups
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.ParseUint(l, 10, 32)
		if err != nil {
			return tagsRequest{}, bad("invalid limit: %s", l)
		}
		if n > 0 {
			req.limit = int(min(n, maxTagValues))
		}
	}
	return req, nil
}

// ownValues takes out of req the condition groups that compare tag a
// itself with = a static, and returns those statics: Tempo answers them
// without reading the data (pkg/traceql/engine.go ExecuteTagValues).
// read is false when no group is left to read.
func ownValues(req tagsRequest, a traceql.Attribute) (vals []traceql.Static, rest tagsRequest, read bool) {
	if req.groups == nil {
		return nil, req, true
	}
	rest = req
	rest.groups = nil
	for _, g := range req.groups {
		own := false
		for _, c := range g {
			// "= nil" is the attribute missing (Tempo's OpNotExists), no
			// value of it.
			if c, ok := c.(traceql.Comparison); ok && c.Attr == a && c.Op == "=" && c.Value.Kind != traceql.Nil {
				vals = append(vals, c.Value)
				own = true
				break
			}
		}
		if !own {
			rest.groups = append(rest.groups, g)
		}
	}
	return vals, rest, rest.groups != nil
}

// floatText is a float tag value's text as Tempo writes it
// (pkg/traceql/util.go MakeCollectTagValueFunc: Static.String, which is
// ast_stringer.go EncodeToString: FormatFloat 'g', then .0 when neither
// . nor e shows, so that a whole float does not read as an int).
func floatText(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, "e.") {
		s += ".0"
	}
	return s
}

// jsonFloatText is floatText of a JSON number's text (as DuckDB prints
// a double: 1000000.0 where Tempo writes 1e+06); text that is not a
// number is kept.
func jsonFloatText(text string) string {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return text
	}
	return floatText(f)
}

// staticValue is a static as a tag value (tempopb.TagValue).
func staticValue(v traceql.Static) tagValue {
	switch v.Kind {
	case traceql.Int:
		return tagValue{Type: "int", Value: strconv.FormatInt(v.I, 10)}
	case traceql.Float:
		return tagValue{Type: "float", Value: floatText(v.F)}
	case traceql.Bool:
		return tagValue{Type: "bool", Value: strconv.FormatBool(v.B)}
	case traceql.Duration:
		return tagValue{Type: "duration", Value: v.D.String()}
	case traceql.Status, traceql.Kind:
		return tagValue{Type: "keyword", Value: v.S}
	}
	return tagValue{Type: "string", Value: v.S}
}

// spans is the SQL (WITH clause and FROM) of the spans a tags request
// reads: the window's, those of q when sent.
func (s *server) spans(b *traceql.Builder, req tagsRequest) (with, from string, err error) {
	b.StartMicros, b.EndMicros = req.startMicros, req.endMicros
	b.TraceReachMicros = traceReach.Microseconds()
	if req.groups == nil {
		return "", b.SpanRelation() + " sp", nil
	}
	m, err := b.Matches(traceql.Or(req.groups))
	if err != nil {
		return "", "", bad("%v", err)
	}
	return "WITH " + m + "\n", b.SpanRelation() + " sp JOIN hit USING (" + traceql.SpanKey + ")", nil
}

// attributeNames are the distinct attribute names of the scope's spans
// of req, by scope ("span", "resource"), sorted.
func (s *server) attributeNames(ctx context.Context, scope tenancy.Scope, req tagsRequest, scopes []string) (map[string][]string, error) {
	b := &traceql.Builder{Table: s.Table}
	with, from, err := s.spans(b, req)
	if err != nil {
		return nil, err
	}
	// The names of each scope as one list (unnest, a table function in
	// the select list, is not among the read path's functions).
	var parts []string
	for _, sc := range scopes {
		col := map[string]string{"span": "span_attributes", "resource": "resource_attributes"}[sc]
		parts = append(parts, fmt.Sprintf("SELECT '%s' AS scope, list_distinct(flatten(list(DISTINCT json_keys(%s)))) AS tags FROM %s", sc, col, from))
	}
	sql := with + strings.Join(parts, " UNION ALL ")
	out := map[string][]string{}
	err = each(ctx, s.Reader, scope, sql, b.Params, func(r row) error {
		names := r.strs(1)
		slices.Sort(names)
		out[r.str(0)] = names
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tag names: %w", err)
	}
	return out, nil
}

// tagsV1 answers /api/search/tags: the span and resource attribute
// names, with the intrinsics when scope=intrinsic asks for them
// (modules/frontend/tag_handlers.go: "V1 tag lookup only returns
// intrinsics when scope is set explicitly").
func (s *server) tagsV1(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	sc, scopes, names, err := s.tagNames(r, scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var all []string
	if sc == "intrinsic" {
		all = append(all, intrinsicTags...)
	}
	for _, sc := range scopes {
		all = append(all, names[sc]...)
	}
	slices.Sort(all)
	writeJSON(w, tagsResponse{TagNames: slices.Compact(all)})
}

// tagNames reads a tags request and the attribute names it asks for:
// its scope parameter, the attribute scopes that asks for, and their
// names by scope.
func (s *server) tagNames(r *http.Request, scope tenancy.Scope) (sc string, scopes []string, names map[string][]string, err error) {
	req, err := parseTagsRequest(r)
	if err != nil {
		return "", nil, nil, err
	}
	sc = r.URL.Query().Get("scope")
	if scopes, err = tagScopes(sc); err != nil || len(scopes) == 0 {
		return sc, nil, nil, err
	}
	names, err = s.attributeNames(r.Context(), scope, req, scopes)
	return sc, scopes, names, err
}

// tagScopes are the attribute scopes a scope parameter asks for (none
// or "" for both; intrinsic for neither).
func tagScopes(sc string) ([]string, error) {
	switch sc {
	case "", "none":
		return []string{"resource", "span"}, nil
	case "span", "resource":
		return []string{sc}, nil
	case "intrinsic", "event", "link", "instrumentation":
		return nil, nil
	}
	return nil, bad("invalid scope: %s", sc)
}

// The answers as jsonpb writes tempopb's SearchTagsResponse,
// SearchTagsV2Response, SearchTagValuesResponse and
// SearchTagValuesV2Response: empty lists left out, metrics (none
// counted here) an empty object.
type (
	tagsResponse struct {
		TagNames []string `json:"tagNames,omitempty"`
		Metrics  struct{} `json:"metrics"`
	}
	tagsV2Response struct {
		Scopes  []tagsV2Scope `json:"scopes,omitempty"`
		Metrics struct{}      `json:"metrics"`
	}
	tagValuesResponse struct {
		TagValues []string `json:"tagValues,omitempty"`
		Metrics   struct{} `json:"metrics"`
	}
	tagValuesV2Response struct {
		TagValues []tagValue `json:"tagValues,omitempty"`
		Metrics   struct{}   `json:"metrics"`
	}
)

type tagsV2Scope struct {
	Name string   `json:"name"`
	Tags []string `json:"tags,omitempty"`
}

// tagsV2 answers /api/v2/search/tags: the tags by scope, the intrinsics
// first for an unscoped request or scope=intrinsic (tag_handlers.go:
// "V2 tag lookup returns intrinsics for both unscoped and explicit scope
// requests").
func (s *server) tagsV2(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	sc, scopes, names, err := s.tagNames(r, scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out []tagsV2Scope
	if sc == "" || sc == "none" || sc == "intrinsic" {
		out = append(out, tagsV2Scope{Name: "intrinsic", Tags: intrinsicTags})
	}
	for _, sc := range scopes {
		if len(names[sc]) > 0 {
			out = append(out, tagsV2Scope{Name: sc, Tags: names[sc]})
		}
	}
	writeJSON(w, tagsV2Response{Scopes: out})
}

// tagValue is tempopb.TagValue.
type tagValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// jsonTypes are the types of tag values by DuckDB's json_type.
var jsonTypes = map[string]string{"VARCHAR": "string", "BIGINT": "int", "UBIGINT": "int", "DOUBLE": "float", "BOOLEAN": "bool"}

// attributeValues are the distinct values of attribute a (as its JSON
// type and text) among req's spans, sorted by type then value, at most
// req.limit.
func (s *server) attributeValues(ctx context.Context, scope tenancy.Scope, req tagsRequest, a traceql.Attribute) ([]tagValue, error) {
	own, req, read := ownValues(req, a)
	var out []tagValue
	for _, v := range own {
		out = append(out, staticValue(v))
	}
	if !read {
		return out[:min(len(out), req.limit)], nil
	}
	b := &traceql.Builder{Table: s.Table}
	with, from, err := s.spans(b, req)
	if err != nil {
		return nil, err
	}
	var parts []string
	add := func(col string) {
		path := traceql.JSONPath(a.Name)
		parts = append(parts, fmt.Sprintf(`SELECT json_type(%[1]s, %[2]s) AS t, json_extract_string(%[1]s, %[2]s) AS v FROM %[3]s
			WHERE json_type(%[1]s, %[2]s) IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'DOUBLE', 'BOOLEAN', 'ARRAY')`, col, path, from))
	}
	switch a.Scope {
	case traceql.Intrinsic:
		col := map[string]string{traceql.IntrinsicName: "name", traceql.IntrinsicStatusMessage: "status_message",
			traceql.IntrinsicRootName: "name", traceql.IntrinsicRootServiceName: "service_name"}[a.Name]
		if col == "" {
			// An intrinsic whose values are numbers of each span or trace
			// (duration, nestedSetParent, …): no list of them is kept.
			return nil, nil
		}
		cond := col + " IS NOT NULL"
		if a.Name == traceql.IntrinsicRootName || a.Name == traceql.IntrinsicRootServiceName {
			cond += " AND parent_span_id IS NULL"
		}
		parts = append(parts, fmt.Sprintf("SELECT 'VARCHAR' AS t, %s AS v FROM %s WHERE %s", col, from, cond))
	case traceql.SpanScope:
		add("span_attributes")
	case traceql.ResourceScope:
		if a.Name == "service.name" {
			parts = append(parts, fmt.Sprintf("SELECT 'VARCHAR' AS t, service_name AS v FROM %s WHERE service_name IS NOT NULL", from))
		} else {
			add("resource_attributes")
		}
	default:
		add("span_attributes")
		add("resource_attributes")
	}
	sql := fmt.Sprintf("%sSELECT DISTINCT t, v FROM (%s) ORDER BY t, v LIMIT %s", with, strings.Join(parts, " UNION ALL "), b.Param(req.limit))
	err = each(ctx, s.Reader, scope, sql, b.Params, func(r row) error {
		if r.str(0) == "ARRAY" {
			out = append(out, arrayValues(r.str(1))...)
			return nil
		}
		v := tagValue{Type: jsonTypes[r.str(0)], Value: r.str(1)}
		if v.Type == "float" {
			v.Value = jsonFloatText(v.Value)
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the values of %s: %w", a, err)
	}
	// An array's elements are values of the tag (vparquet4 keeps them
	// in the value columns, block_autocomplete.go reads them there): the
	// arrays come first ("ARRAY" sorts before the scalar types), each
	// distinct array one row of the limit.
	slices.SortFunc(out, func(x, y tagValue) int { return cmp.Or(cmp.Compare(x.Type, y.Type), cmp.Compare(x.Value, y.Value)) })
	out = slices.Compact(out)
	return out[:min(len(out), req.limit)], nil
}

// arrayValues are the scalar elements of a JSON array, typed as
// jsonTypes names them.
func arrayValues(text string) []tagValue {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var elems []any
	if d.Decode(&elems) != nil {
		return nil
	}
	var out []tagValue
	for _, e := range elems {
		switch e := e.(type) {
		case string:
			out = append(out, tagValue{Type: "string", Value: e})
		case bool:
			out = append(out, tagValue{Type: "bool", Value: strconv.FormatBool(e)})
		case json.Number:
			if _, err := strconv.ParseInt(e.String(), 10, 64); err == nil {
				out = append(out, tagValue{Type: "int", Value: e.String()})
			} else {
				out = append(out, tagValue{Type: "float", Value: jsonFloatText(e.String())})
			}
		}
	}
	return out
}

// virtualValuesV2 are the values Tempo answers of status and kind
// without reading data, and the none of the durations
// (pkg/search/util.go GetVirtualTagValuesV2); ok false for other tags.
func virtualValuesV2(a traceql.Attribute) ([]tagValue, bool) {
	if a.Scope != traceql.Intrinsic {
		return nil, false
	}
	keywords := func(vs ...string) []tagValue {
		out := make([]tagValue, len(vs))
		for i, v := range vs {
			out[i] = tagValue{Type: "keyword", Value: v}
		}
		return out
	}
	switch a.Name {
	case traceql.IntrinsicStatus:
		return keywords("ok", "error", "unset"), true
	case traceql.IntrinsicKind:
		return keywords("client", "server", "producer", "consumer", "internal", "unspecified"), true
	case traceql.IntrinsicDuration, traceql.IntrinsicTraceDuration:
		return []tagValue{}, true
	}
	return nil, false
}

// tagValuesV2 answers /api/v2/search/tag/{tag}/values: the tag is a
// TraceQL attribute or intrinsic, URL-decoded once (the mux's path value,
// as Tempo's router decodes it); one that does not parse as one (a tag
// encoded twice, span%3Aname) is 400 as in pkg/api/search_tags.go
// (traceql.ParseIdentifier).
func (s *server) tagValuesV2(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	tag := r.PathValue("tag")
	if tag == "" {
		s.fail(w, r, bad("please provide a non-empty tagName"))
		return
	}
	a, err := traceql.ParseAttribute(tag)
	if err != nil {
		s.fail(w, r, bad("please provide a valid tagName: %v", err))
		return
	}
	req, err := parseTagsRequest(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	values, ok := virtualValuesV2(a)
	if !ok {
		if values, err = s.attributeValues(r.Context(), scope, req, a); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	writeJSON(w, tagValuesV2Response{TagValues: values})
}

// v1Attribute is the attribute a v1 tag names: an attribute of a span or
// its resource, but for the tags Tempo directs to intrinsics or to one
// scope (tempodb/encoding/vparquet4/block_search_tags.go
// translateTagToAttribute).
func v1Attribute(tag string) traceql.Attribute {
	switch tag {
	case "name":
		return traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicName}
	case "rootServiceName":
		return traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicRootServiceName}
	case "rootName":
		return traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicRootName}
	case "service.name", "cluster", "namespace", "pod", "container",
		"k8s.namespace.name", "k8s.cluster.name", "k8s.pod.name", "k8s.container.name":
		return traceql.Attribute{Scope: traceql.ResourceScope, Name: tag}
	case "http.method", "http.url", "http.status_code":
		return traceql.Attribute{Scope: traceql.SpanScope, Name: tag}
	}
	return traceql.Attribute{Scope: traceql.Unscoped, Name: tag}
}

// tagValuesV1 answers /api/search/tag/{tag}/values: the tag is an
// attribute's name, of a span or its resource; the values are strings;
// status.code and error have Tempo's virtual values
// (pkg/search/util.go GetVirtualTagValues).
func (s *server) tagValuesV1(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	tag := r.PathValue("tag")
	if tag == "" {
		s.fail(w, r, bad("please provide a non-empty tagName"))
		return
	}
	req, err := parseTagsRequest(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out []string
	switch tag {
	case "status.code":
		out = []string{"unset", "ok", "error"}
	case "error":
		out = []string{"true"}
	default:
		values, err := s.attributeValues(r.Context(), scope, req, v1Attribute(tag))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, v := range values {
			out = append(out, v.Value)
		}
		slices.Sort(out)
		out = slices.Compact(out)
	}
	writeJSON(w, tagValuesResponse{TagValues: out})
}
