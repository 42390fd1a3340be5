package loki

import (
	"encoding/json"
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
