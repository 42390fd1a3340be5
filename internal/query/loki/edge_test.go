package loki

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// TestTwoRecordsInOneMicrosecond: two records of the same line and
// stream a few hundred nanoseconds apart are two entries, as Loki keeps
// them (it drops an entry only as a duplicate of the same nanosecond,
// line and stream); only a copy (a client's retry) is one.
func TestTwoRecordsInOneMicrosecond(t *testing.T) {
	r := record{tenant: "a", resource: map[string]string{"service.name": "loop"}, severity: plog.SeverityNumberInfo, body: "retrying"}
	first, second := r, r
	first.at, second.at = time.Second+100, time.Second+600
	srv := serverOf(t, []record{first, second, second})
	var out struct {
		Data struct {
			Result []struct {
				Values [][2]string `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="loop"}`)), &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range out.Data.Result {
		for _, v := range s.Values {
			got = append(got, v[0])
		}
	}
	if len(got) != 2 {
		t.Fatalf("entries at %v, want two: at %d and %d", got, t0.Add(second.at).UnixNano(), t0.Add(first.at).UnixNano())
	}
}

// TestSinceIsAPrometheusDuration: since is read as Loki reads it,
// a Prometheus duration (pkg/loghttp/params.go determineBounds:
// model.ParseDuration), so a fraction or a negative one is refused with
// 400, not taken as Go would take it (a negative since put start after
// end, and the labels answered nothing instead of an error).
func TestSinceIsAPrometheusDuration(t *testing.T) {
	srv := server(t)
	end := jsonNumber(t0.Add(time.Minute).UnixNano())
	for _, c := range []struct {
		path, since string
		want        int
	}{
		{"/loki/api/v1/query_range", "1.5h", 400},
		{"/loki/api/v1/query_range", "90m", 200},
		{"/loki/api/v1/query_range", "1d", 200},
		{"/loki/api/v1/labels", "-1h", 400},
		{"/loki/api/v1/labels", "500us", 400},
		{"/loki/api/v1/labels", "1h30m", 200},
	} {
		params := url.Values{"end": {end}, "since": {c.since}}
		if c.path == "/loki/api/v1/query_range" {
			params.Set("query", `{service_name=~".+"}`)
		}
		if status, body := get(t, srv, "a", c.path, params); status != c.want {
			t.Errorf("%s since=%s: %d %s, want %d", c.path, c.since, status, body, c.want)
		}
	}
}
