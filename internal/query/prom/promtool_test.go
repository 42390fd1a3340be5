package prom

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPromtool checks the answers with promtool query (Debian's
// prometheus package, 2.42), which decodes them with Prometheus's own
// client. promtool 2.42 sends no X-Scope-OrgID nor bearer token (its
// query commands take no http config, and instant no --header): it
// reaches its tenant through a token bound to one tenant, sent as the
// password of the server URL's user info (Basic authentication, which
// Go's HTTP client sends from the URL).
func TestPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed: CI installs Debian's prometheus package (.ci/run)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus): the PromQL answers are not checked with it")
	}
	f := newFixture(t)
	server := func(token string) string {
		u, err := url.Parse(f.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("promtool", token)
		return u.String()
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	decode := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	at := rfc3339(end)

	out, err := run("query", "instant", "-o", "json", "--time="+at, server("ta"), "rate(http_server_requests_total[1m]) * 15")
	if err != nil {
		t.Fatalf("promtool query instant: %v: %s", err, out)
	}
	var vec []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	decode(out, &vec)
	if len(vec) != 1 || vec[0].Value[1] != "10" || vec[0].Metric["service_name"] != "checkout" || vec[0].Value[0] != float64(end.Unix()) {
		t.Errorf("instant: %s", out)
	}

	out, err = run("query", "range", "-o", "json", "--start="+rfc3339(t0), "--end="+rfc3339(t0.Add(time.Minute)), "--step=30s",
		server("ta"), "process_memory_usage_bytes")
	if err != nil {
		t.Fatalf("promtool query range: %v: %s", err, out)
	}
	var matrix []struct {
		Values [][2]any `json:"values"`
	}
	decode(out, &matrix)
	if len(matrix) != 1 || len(matrix[0].Values) != 3 || matrix[0].Values[2][1] != "1004" {
		t.Errorf("range: %s", out)
	}

	// promtool query labels asks for a label's values.
	out, err = run("query", "labels", "-o", "json", server("tb"), "http_route")
	if err != nil {
		t.Fatalf("promtool query labels: %v: %s", err, out)
	}
	var routes []string
	decode(out, &routes)
	if !slices.Equal(routes, []string{"/admin-b"}) {
		t.Errorf("team-b's routes: %s", out)
	}

	out, err = run("query", "series", "-o", "json", "--match=http_server_duration_seconds_bucket", server("ta"))
	if err != nil {
		t.Fatalf("promtool query series: %v: %s", err, out)
	}
	var series []map[string]string
	decode(out, &series)
	if len(series) != 4 || series[0]["le"] != "+Inf" {
		t.Errorf("series: %s", out)
	}

	// Another tenant's token reads none of team-a's series; no token is
	// refused.
	out, err = run("query", "instant", "-o", "json", "--time="+at, server("tb"), `{service_name="checkout"}`)
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("team-b reads team-a's: %v: %s", err, out)
	}
	out, err = run("query", "instant", "--time="+at, f.srv.URL, "up")
	if err == nil || !strings.Contains(out, "a valid bearer token is required") {
		t.Errorf("without a token: %v: %s", err, out)
	}
}
