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
