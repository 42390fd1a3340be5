package loki

import (
	"encoding/json"
	"math"
	"net/url"
	"slices"
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

// TestVolumeStepsAsLokiStampsThem: index/volume_range splits the range
// as Loki's volume middleware does (pkg/querier/queryrange/volume.go
// NewVolumeMiddleware, pkg/util/time.go ForInterval with
// endTimeInclusive): steps aligned to multiples of step since the epoch,
// the first from start, each stamped at its end less a millisecond
// (SplitGap), the last at the range's end rounded up to the millisecond
// (pkg/util/conv.go RoundToMilliseconds); index/volume's one sample is at
// that end too. Checkout's records are at t0+1s, 2s and 3s; over
// [t0+0.5s, t0+3.5s) by 2s: the first in the step stamped t0+1.999s, the
// others in the last, stamped t0+3.5s.
func TestVolumeStepsAsLokiStampsThem(t *testing.T) {
	srv := server(t)
	params := url.Values{"query": {`{service_name="checkout"}`}, "start": {ns(t0.Add(500 * time.Millisecond))},
		"end": {ns(t0.Add(3500 * time.Millisecond))}, "step": {"2s"}}
	typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/index/volume_range", params))
	wantValues := []float64{float64(len(lakeRecords[0].body)), float64(len(lakeRecords[1].body) + len(lakeRecords[2].body))}
	wantTimes := []time.Time{t0.Add(1999 * time.Millisecond), t0.Add(3500 * time.Millisecond)}
	if typ != "matrix" || len(frames) != 1 || !slices.Equal(frames[0].values, wantValues) ||
		!slices.EqualFunc(frames[0].times, wantTimes, time.Time.Equal) {
		t.Errorf("volume_range: %s %+v, want %v at %v", typ, frames, wantValues, wantTimes)
	}
	params.Set("end", ns(t0.Add(3500*time.Millisecond+1)))
	typ, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/index/volume", params))
	if want := t0.Add(3501 * time.Millisecond); typ != "vector" || len(frames) != 1 || len(frames[0].times) != 1 || !frames[0].times[0].Equal(want) {
		t.Errorf("volume: %s %+v, want one sample at %v (the end rounded up to the millisecond)", typ, frames, want)
	}
}

// TestRangeEndingAtTheEndOfTime: a range whose end is int64's last
// nanosecond (a script asking for everything) holds the records before
// it, as Loki's does: the end's bounds, widened by a microsecond or a
// nanosecond for the scan, are held at int64's end instead of wrapping
// to 1677, which made every such range empty.
func TestRangeEndingAtTheEndOfTime(t *testing.T) {
	srv := server(t)
	end := jsonNumber(math.MaxInt64)
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range",
		url.Values{"query": {`{service_name="search"}`}, "start": {ns(t0)}, "end": {end}, "limit": {"10"}}))
	if len(frames) != 1 || len(frames[0].lines) != 1 || frames[0].lines[0] != "found 10 results" {
		t.Errorf("query_range to the end of time: %+v, want search's record", frames)
	}
	// The first step, at t0+5s, counts search's record at t0+4s.
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range",
		url.Values{"query": {`count_over_time({service_name="search"}[1m])`}, "start": {ns(t0.Add(5 * time.Second))}, "end": {end}, "step": {"1000000s"}}))
	got := seriesValues(frames)
	var first []float64
	for _, v := range got {
		first = v
	}
	if len(got) != 1 || len(first) == 0 || first[0] != 1 {
		t.Errorf("count_over_time to the end of time: %v, want search's record counted at the first step", got)
	}
	var series struct{ Data []map[string]string }
	if err := json.Unmarshal(ok(t, srv, "a", "/loki/api/v1/series",
		url.Values{"match[]": {`{service_name="search"}`}, "start": {ns(t0)}, "end": {end}}), &series); err != nil {
		t.Fatal(err)
	}
	if len(series.Data) != 1 {
		t.Errorf("series to the end of time: %v, want search's stream", series.Data)
	}
}
