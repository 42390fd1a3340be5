package loki

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParsersAndFormatting: json, logfmt, regexp and pattern extract
// labels, label filters compare them as strings, numbers, durations,
// line_format and label_format rewrite, drop removes.
func TestParsersAndFormatting(t *testing.T) {
	srv := server(t)
	for q, want := range map[string][]string{
		`{service_name="checkout"} | json | status >= 500 | line_format "{{.msg}} by {{.user_id}}"`:                                    {"payment failed by u1"},
		`{service_name="checkout"} | json | took > 100ms | line_format "{{.level | ToUpper}}"`:                                         {"ERROR"},
		`{service_name="checkout"} | json code="status" | code == 502 | line_format "{{.code}}"`:                                       {"502"},
		`{service_name="checkout"} | logfmt | took > 1s and rows = 42 | line_format "{{.msg}}"`:                                        {"slow query"},
		`{service_name="checkout"} | logfmt | level="warn" or status="200" | line_format "{{.msg}}{{.status}}"`:                        {"slow query", "200"},
		`{service_name="checkout"} | regexp "GET (?P<path>\\S+)" | path = "/cart" | line_format "{{.path}}"`:                           {"/cart"},
		`{service_name="checkout"} | pattern "<method> <path> status=<code> <_>" | code = "200" | line_format "{{.method}} {{.path}}"`: {"GET /cart"},
		`{service_name="checkout"} | json | __error__ != "" | line_format "{{.__error__}}"`:                                            {"JSONParserErr", "JSONParserErr"},
		`{service_name="checkout"} | json | __error__ = "" | label_format who=user_id | line_format "{{.who}}"`:                        {"u1"},
		`{service_name="checkout"} |= "cart" | logfmt | line_format "{{.duration}}" |= "12"`:                                           {"12ms"},
	} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(q)))
		got := newestFirst(frames[0])
		if !slices.Equal(got, want) {
			t.Errorf("%s\n  got %q, want %q", q, got, want)
		}
	}
}

// TestDropAndCategorizedLabels: with the categorize-labels flag each
// entry carries its structured metadata and parsed labels apart from
// the stream's; drop removes labels from both.
func TestDropAndCategorizedLabels(t *testing.T) {
	srv := server(t)
	body := ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="checkout"} |= "payment" | json | drop user_id, trace_id`),
		"X-Loki-Response-Encoding-Flags", "categorize-labels")
	var resp struct {
		Data struct {
			EncodingFlags []string `json:"encodingFlags"`
			Result        []struct {
				Stream map[string]string `json:"stream"`
				Values [][]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Data.Result) != 1 || len(resp.Data.Result[0].Values) != 1 || !slices.Equal(resp.Data.EncodingFlags, []string{"categorize-labels"}) {
		t.Fatalf("%s", body)
	}
	r := resp.Data.Result[0]
	if len(r.Stream) != 3 || r.Stream["detected_level"] != "error" {
		t.Fatalf("stream %v", r.Stream)
	}
	var cats struct {
		StructuredMetadata map[string]string `json:"structuredMetadata"`
		Parsed             map[string]string `json:"parsed"`
	}
	if err := json.Unmarshal(r.Values[0][2], &cats); err != nil {
		t.Fatal(err)
	}
	if cats.StructuredMetadata["severity_text"] != "ERROR" || cats.StructuredMetadata["host_name"] != "h1" ||
		cats.Parsed["msg"] != "payment failed" || cats.Parsed["status"] != "502" || cats.Parsed["level"] != "error" {
		t.Fatalf("categories %+v", cats)
	}
	if _, ok := cats.Parsed["user_id"]; ok {
		t.Fatalf("user_id not dropped: %+v", cats)
	}
}

// TestUnwrap: unwrap takes sample values from a label (duration() in
// seconds), grouped by the labels asked for; a line without the label
// gives none, one whose value does not convert fails the query.
func TestUnwrap(t *testing.T) {
	srv := server(t)
	v := window(`sum by (service_name) (max_over_time({service_name="checkout"} | logfmt | unwrap duration(took) | __error__="" [1m]))`,
		"step", "60s", "start", ns(t0.Add(time.Minute)), "end", ns(t0.Add(time.Minute)))
	typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", v))
	if typ != "matrix" || len(frames) != 1 || frames[0].values[0] != 1.5 {
		t.Fatalf("%s %+v", typ, frames)
	}
	// The lines without rows give no sample and no error (Loki
	// pkg/logql/log/metrics_extraction.go, grafana/loki#6713): the sum
	// is the one line's.
	v.Set("query", `sum(sum_over_time({service_name="checkout"} | logfmt | unwrap rows [1m]))`)
	typ, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", v))
	if typ != "matrix" || len(frames) != 1 || frames[0].values[0] != 42 {
		t.Fatalf("%s %+v, want 42", typ, frames)
	}
	// Without the error filter, a line whose value does not parse fails
	// the query, as Loki's does.
	v.Set("query", `sum(sum_over_time({service_name="checkout"} | logfmt | unwrap msg [1m]))`)
	status, body := get(t, srv, "a", "/loki/api/v1/query_range", v)
	if status != 400 || !strings.Contains(string(body), "SampleExtractionErr") {
		t.Fatalf("%d %s", status, body)
	}
}
