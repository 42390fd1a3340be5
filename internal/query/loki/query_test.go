package loki

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQueryRangeStreams: a stream selector answers the tenant's entries
// of the stream, each once though loaded twice, newest first by default,
// oldest first forward, at most limit; timestamps are exact ns.
func TestQueryRangeStreams(t *testing.T) {
	srv := server(t)
	typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="checkout"}`)))
	if typ != "streams" {
		t.Fatalf("result type %s", typ)
	}
	f := frames[0]
	lines := newestFirst(f)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "level=warn") || !strings.HasPrefix(lines[2], "GET /cart") {
		t.Fatalf("lines %q", lines)
	}
	for i, line := range f.lines {
		l := f.labels[i]
		if l["service_name"] != "checkout" || l["k8s_namespace_name"] != "prod" {
			t.Fatalf("stream labels %v", l)
		}
		if !strings.HasPrefix(line, "GET") {
			continue
		}
		if f.ts[i] != jsonNumber(t0.Add(time.Second+123).UnixNano()) {
			t.Fatalf("the GET entry's time %s, want the record's ns", f.ts[i])
		}
		// Structured metadata come with the stream labels when not
		// categorized, as Loki answers them.
		if l["http_method"] != "GET" || l["host_name"] != "h1" || l["severity_text"] != "INFO" || l["detected_level"] != "info" {
			t.Fatalf("labels of the GET entry %v", l)
		}
	}
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="checkout"}`, "direction", "forward", "limit", "2")))
	if lines := newestFirst(frames[0]); len(lines) != 2 || !strings.HasPrefix(lines[1], "GET /cart") || !strings.HasPrefix(lines[0], "{") {
		t.Fatalf("forward, limit 2: %q", lines)
	}
}

// TestLineFilters: line filters keep the lines holding (or not) a
// string or matching a regular expression.
func TestLineFilters(t *testing.T) {
	srv := server(t)
	for q, want := range map[string][]string{
		`{service_name="checkout"} |= "payment"`:                         {"payment failed"},
		`{service_name=~"check.*|search"} != "level" != "GET"`:           {"found 10 results"},
		`{service_name="checkout"} |~ "status=\\d+"`:                     {"GET /cart"},
		`{service_name="checkout"} |= "slow" or "cart"`:                  {"slow query", "GET /cart"},
		`{service_name="checkout"} |~ "(?i)PAYMENT" |= "u1"`:             {"payment failed"},
		`{service_name="checkout", detected_level="error"}`:              {"payment failed"},
		`{service_name="checkout"} |> "GET <_> status=<_> <_>"`:          {"GET /cart"},
		`{service_name="checkout"} | detected_level != "info" |= "slow"`: {"slow query"},
	} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(q)))
		got := newestFirst(frames[0])
		if len(got) != len(want) {
			t.Errorf("%s: %q, want %q", q, got, want)
			continue
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Errorf("%s: %q, want %q", q, got, want)
			}
		}
	}
}

// TestHealthCheck: Grafana's "Save & test" sends vector(1)+vector(1) as
// an instant query from 1s to 4s and wants one frame of two fields
// whose value is 2 (grafana pkg/tsdb/loki/healthcheck.go).
func TestHealthCheck(t *testing.T) {
	srv := server(t)
	body := ok(t, srv, "a", "/loki/api/v1/query", url.Values{"query": {"vector(1)+vector(1)"}, "time": {"4000000000"}, "direction": {"backward"}})
	typ, frames := decodeGrafana(t, body)
	if typ != "vector" || len(frames) != 1 || len(frames[0].values) != 1 || frames[0].values[0] != 2 {
		t.Fatalf("%s %+v: %s", typ, frames, body)
	}
	// Grafana sends the end's ns, "4000000000": ten digits, which Loki
	// reads as seconds (pkg/loghttp/params.go parseTimestamp).
	if !frames[0].times[0].Equal(time.Unix(4_000_000_000, 0)) {
		t.Fatalf("time %v", frames[0].times[0])
	}
}

// TestMetricQueries: range aggregations over the entries of each step's
// window, vector aggregations, binary operations.
func TestMetricQueries(t *testing.T) {
	srv := server(t)
	run := func(q string, params ...string) map[string][]float64 {
		t.Helper()
		v := window(q, append([]string{"step", "10s", "end", ns(t0.Add(10 * time.Second))}, params...)...)
		typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", v))
		if typ != "matrix" {
			t.Fatalf("%s: result type %s", q, typ)
		}
		return seriesValues(frames)
	}
	check := func(q string, want map[string][]float64) {
		t.Helper()
		got := run(q)
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", q, got, want)
		}
		for k, w := range want {
			if !slices.Equal(got[k], w) {
				t.Fatalf("%s: %v, want %v", q, got, want)
			}
		}
	}
	// Steps at t0 and t0+10s: the second's window (t0, t0+10s] holds the
	// three checkout records (the duplicate once) and search's.
	check(`sum(count_over_time({service_name=~".+"}[10s]))`, map[string][]float64{"map[]": {4}})
	check(`sum by (service_name) (count_over_time({service_name=~".+"}[10s]))`,
		map[string][]float64{"map[service_name:checkout]": {3}, "map[service_name:search]": {1}})
	check(`sum by (service_name) (rate({service_name="search"}[10s]))`, map[string][]float64{"map[service_name:search]": {0.1}})
	check(`sum(bytes_over_time({service_name="search"}[10s]))`, map[string][]float64{"map[]": {16}})
	// Four series: checkout's three levels and search.
	check(`count(count_over_time({service_name=~".+"}[10s]) ) * 2 + 1`, map[string][]float64{"map[]": {4*2 + 1}})
	check(`topk(1, sum by (service_name) (count_over_time({service_name=~".+"}[10s])))`, map[string][]float64{"map[service_name:checkout]": {3}})
	check(`max by (detected_level) (count_over_time({service_name="checkout"}[10s])) > 0`,
		map[string][]float64{"map[detected_level:error]": {1}, "map[detected_level:info]": {1}, "map[detected_level:warn]": {1}})
	// Grafana's log volume query (public/app/plugins/datasource/loki
	// queryUtils/ datasource.ts getLogsVolumeDataProvider).
	check(`sum by (level, detected_level) (count_over_time({service_name="checkout"} | drop __error__[10s]))`,
		map[string][]float64{"map[detected_level:error]": {1}, "map[detected_level:info]": {1}, "map[detected_level:warn]": {1}})
}

// TestRecordWithoutTime: a record with only an observed time is found
// at that time, as Loki stores it; POST takes the parameters as a form.
func TestRecordWithoutTime(t *testing.T) {
	srv := serverOf(t, []record{{tenant: "a", resource: map[string]string{"service.name": "cron"}, at: 5 * time.Second, body: "tick", observedOnly: true}})
	resp, err := http.PostForm(srv.URL+"/loki/api/v1/query_range", window(`{service_name="cron"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST without a tenant: %d", resp.StatusCode)
	}
	req, err := http.NewRequest("POST", srv.URL+"/loki/api/v1/query_range", strings.NewReader(window(`{service_name="cron"}`).Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Scope-OrgID", "a")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s %v", resp.StatusCode, body, err)
	}
	_, frames := decodeGrafana(t, body)
	if f := frames[0]; len(f.lines) != 1 || f.lines[0] != "tick" || !f.times[0].Equal(t0.Add(5*time.Second)) || f.labels[0]["detected_level"] != "unknown" {
		t.Fatalf("%+v", f)
	}
}

// TestRefusals: malformed queries and parameters are the caller's
// errors (400, Loki's messages), as are pipeline errors of metric
// queries.
func TestRefusals(t *testing.T) {
	srv := server(t)
	for _, c := range []struct {
		path   string
		params url.Values
		msg    string
	}{
		{"/loki/api/v1/query_range", window(`{service_name="checkout"`), "parse error"},
		{"/loki/api/v1/query_range", window(`{service_name=~".*"}`), "at least one"},
		{"/loki/api/v1/query_range", window(`{service_name="checkout"}`, "limit", "0"), "limit must be a positive value"},
		{"/loki/api/v1/query_range", window(`{service_name="checkout"}`, "direction", "sideways"), "invalid direction"},
		{"/loki/api/v1/query_range", window(`{service_name="checkout"}`, "limit", "5001"), "max entries limit per query exceeded"},
		{"/loki/api/v1/query", url.Values{"query": {`{service_name="checkout"}`}}, "log queries are not supported as an instant query"},
		{"/loki/api/v1/query_range", window(`rate({service_name="checkout"}[1m])`, "step", "1ms", "end", ns(t0.Add(time.Hour))), "exceeded maximum resolution"},
		// By a label: Loki runs the parser (a sum without labels would
		// not, TestParserErrorsAsLokiHintsThem).
		{"/loki/api/v1/query_range", window(`sum by (service_name) (count_over_time({service_name="checkout"} | json [1m]))`), "JSONParserErr"},
		{"/loki/api/v1/labels", window(`sum(rate({a="b"}[1m]))`), "stream selector"},
	} {
		status, body := get(t, srv, "a", c.path, c.params)
		if status != http.StatusBadRequest || !strings.Contains(string(body), c.msg) {
			t.Errorf("%s %v: %d %s, want 400 with %q", c.path, c.params.Get("query"), status, body, c.msg)
		}
	}
}

// TestDetectedLevelFromTheLineWithoutSeverity: a record sent without a
// severity (number 0, no text: a Collector's filelog receiver without a
// severity parser) has the level its line states, as Loki's distributor
// detects it (pkg/distributor/field_detection.go extractLogLevel →
// detectLogLevelFromLogEntry: no severity_number metadata, so
// extractLogLevelFromLogLine reads a JSON or logfmt level field, else
// the words of the line). Grafana's log volume, sum by (detected_level),
// then shows error and warn where "unknown" is answered here.
func TestDetectedLevelFromTheLineWithoutSeverity(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "app"}, at: time.Second, body: `level=error msg="boom"`},
		{tenant: "a", resource: map[string]string{"service.name": "app"}, at: 2 * time.Second, body: `{"level":"warn","msg":"slow"}`},
	})
	v := window(`sum by (detected_level) (count_over_time({service_name="app"}[10s]))`, "step", "10s", "end", ns(t0.Add(10*time.Second)))
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", v))
	got := seriesValues(frames)
	want := map[string][]float64{"map[detected_level:error]": {1}, "map[detected_level:warn]": {1}}
	if len(got) != len(want) || !slices.Equal(got["map[detected_level:error]"], want["map[detected_level:error]"]) ||
		!slices.Equal(got["map[detected_level:warn]"], want["map[detected_level:warn]"]) {
		t.Fatalf("log volume by level: %v, want %v", got, want)
	}
}

// TestDetectedLevelOfLines: the level a line states, as Loki's
// extractLogLevelFromLogLine reads it, selects the line by
// detected_level, and a severity wins over the line.
func TestDetectedLevelOfLines(t *testing.T) {
	want := map[string]string{
		`{"msg":"x","level":"WARN"}`:                "warn",
		`{"ctx":{"lvl":"dbg"},"msg":"error later"}`: "debug",
		`{"level":"loud","msg":"fatal: disk"}`:      "fatal",
		`ts=1 LVL=err msg=x`:                        "error",
		`msg="warn me" level=info`:                  "info",
		`log.level=critical`:                        "critical",
		`[ERROR] could not connect`:                 "error",
		`GET /warning-page 200 info`:                "info",
		`misc:error errors terror`:                  "unknown",
		`trace id 7: something`:                     "trace",
		"two\nlines: warning":                       "warn",
		`plain line`:                                "unknown",
	}
	var records []record
	at := time.Second
	for line := range want {
		records = append(records, record{tenant: "a", resource: map[string]string{"service.name": "app"}, at: at, body: line})
		at += time.Second
	}
	// A severity is the level whatever the line says.
	records = append(records, record{tenant: "a", resource: map[string]string{"service.name": "app"}, at: at, body: "level=error sev", severity: 9},
		record{tenant: "a", resource: map[string]string{"service.name": "app"}, at: at + time.Second, body: "level=error text", text: "Debug"})
	want["level=error sev"] = "info"
	want["level=error text"] = "debug"
	srv := serverOf(t, records)
	got := map[string]string{}
	for _, level := range []string{"trace", "debug", "info", "warn", "error", "critical", "fatal", "unknown"} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="app", detected_level="`+level+`"}`)))
		for _, f := range frames {
			for _, line := range newestFirst(f) {
				if prev, dup := got[line]; dup {
					t.Errorf("%q is %s and %s", line, prev, level)
				}
				got[line] = level
			}
		}
	}
	for line, level := range want {
		if got[line] != level {
			t.Errorf("%q: detected_level %q, want %q", line, got[line], level)
		}
	}
}
