package loki

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestRejectLabel: labels whose values are all ids are left out of
// detected_labels; booleans and categories are kept.
func TestRejectLabel(t *testing.T) {
	set := func(vs ...string) map[string]bool {
		m := map[string]bool{}
		for _, v := range vs {
			m[v] = true
		}
		return m
	}
	for _, c := range []struct {
		values map[string]bool
		reject bool
	}{
		{set(), true},
		{set("0", "1"), false},
		{set("1", "2", "3"), true},
		{set("8c6f0e4e-2b1a-4f1e-9d7c-1c2b3a4d5e6f", "42"), true},
		{set("checkout", "42"), false},
	} {
		if got := rejectLabel(c.values); got != c.reject {
			t.Errorf("%v: reject %v, want %v", c.values, got, c.reject)
		}
	}
}

// TestDetectedFields: the fields of a query's lines, from the json and
// logfmt parsers and the structured metadata, typed by their values.
func TestDetectedFields(t *testing.T) {
	srv := server(t)
	var resp struct {
		Fields []struct {
			Label       string
			Type        string
			Cardinality int
			Parsers     []string
		}
		Limit int
	}
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/detected_fields", window(`{service_name="checkout"}`)), &resp); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range resp.Fields {
		got[f.Label] = fmt.Sprint(f.Type, f.Cardinality, f.Parsers)
	}
	for label, want := range map[string]string{
		"status":        "int2 [json logfmt]",
		"user_id":       "string1 [json]",
		"took":          "duration2 [json logfmt]",
		"rows":          "int1 [logfmt]",
		"severity_text": "string3 []",
		"http_method":   "string1 []",
	} {
		if got[label] != want {
			t.Errorf("%s: %q, want %q (all: %v)", label, got[label], want, got)
		}
	}
	if resp.Limit != 1000 {
		t.Errorf("limit %d", resp.Limit)
	}
}

// TestDetectedFieldValues: a field's distinct values among a query's lines,
// from structured metadata and the parsers, as Logs Drilldown asks for them;
// nothing of another tenant's lines.
func TestDetectedFieldValues(t *testing.T) {
	srv := server(t)
	values := func(tenant, field string, more ...string) (vals []string, limit int) {
		t.Helper()
		var resp struct {
			Values []string
			Limit  int
		}
		body := ok(t, srv, tenant, "/loki/api/v1/detected_field/"+field+"/values", window(`{service_name=~".+"}`, more...))
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return resp.Values, resp.Limit
	}
	for field, want := range map[string]string{
		"status":        "[200 502]",         // logfmt and json
		"took":          "[1.5s 250ms]",      // durations, not sizes
		"severity_text": "[ERROR INFO WARN]", // structured metadata
		"user_id":       "[u1]",              // a json field of a nested object
		"no_such":       "[]",
	} {
		got, limit := values("a", field)
		if fmt.Sprint(got) != want {
			t.Errorf("%s: %v, want %s", field, got, want)
		}
		if wantLimit := map[bool]int{true: 0, false: 1000}[want == "[]"]; limit != wantLimit {
			t.Errorf("%s: limit %d, want %d", field, limit, wantLimit)
		}
	}
	if got, _ := values("a", "severity_text", "limit", "1"); len(got) != 1 {
		t.Errorf("limit 1 gave %v", got)
	}
	if got, _ := values("b", "status"); len(got) != 0 {
		t.Errorf("tenant b sees tenant a's values: %v", got)
	}
	if got, _ := values("b", "severity_text"); fmt.Sprint(got) != "[]" {
		t.Errorf("tenant b: %v", got)
	}
}

// A parsed size is answered as Loki writes it, ready for a query; other
// values as they are.
func TestDetectedFieldBytesValue(t *testing.T) {
	for in, want := range map[string]string{"1.5KiB": "1.5kB", "2MB": "2.0MB", "42": "42", "12ms": "12ms", "u1": "u1"} {
		if got := bytesValue(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
