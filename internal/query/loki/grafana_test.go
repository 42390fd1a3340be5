package loki

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// frame is what Grafana's Loki datasource makes of a result
// (grafana/grafana pkg/util/converter/prom.go ReadPrometheusStyleResult,
// which pkg/tsdb/loki/api.go runs on every answer): streams become one
// frame of labels, time, line and ns timestamp per entry; each matrix
// or vector series a frame of times and float values with its labels.
type frame struct {
	labels []map[string]string // streams: each entry's stream labels
	lines  []string
	ts     []string // streams: the ns timestamps as sent
	times  []time.Time
	metric map[string]string // series: its labels
	values []float64
}

// decodeGrafana decodes an answer as Grafana does, failing where
// Grafana's reader would: a status other than success, an unknown
// result type, a stream timestamp that is not a string, a sample whose
// time is not a number or whose value is not a string of a float.
func decodeGrafana(t *testing.T, body []byte) (resultType string, frames []frame) {
	t.Helper()
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
			Stats      json.RawMessage `json:"stats"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if resp.Status != "success" {
		t.Fatalf("status %q: %s", resp.Status, body)
	}
	dec := func(raw json.RawMessage, v any) {
		t.Helper()
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(v); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
	}
	switch resp.Data.ResultType {
	case "streams":
		var streams []struct {
			Stream map[string]string `json:"stream"`
			Values [][]any           `json:"values"`
		}
		dec(resp.Data.Result, &streams)
		f := frame{}
		for _, s := range streams {
			for _, v := range s.Values {
				if len(v) < 2 {
					t.Fatalf("entry %v: fewer than 2 elements", v)
				}
				ts, ok1 := v[0].(string)
				line, ok2 := v[1].(string)
				if !ok1 || !ok2 {
					t.Fatalf("entry %v: time and line must be strings", v)
				}
				n, err := strconv.ParseInt(ts, 10, 64)
				if err != nil {
					t.Fatalf("entry time %q: %v", ts, err)
				}
				f.labels = append(f.labels, s.Stream)
				f.lines = append(f.lines, line)
				f.ts = append(f.ts, ts)
				f.times = append(f.times, time.Unix(0, n).UTC())
			}
		}
		return "streams", []frame{f}
	case "matrix", "vector":
		var series []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		}
		dec(resp.Data.Result, &series)
		for _, s := range series {
			f := frame{metric: s.Metric}
			pairs := s.Values
			if s.Value != nil {
				pairs = [][]any{s.Value}
			}
			for _, p := range pairs {
				tm, v := samplePair(t, p)
				f.times = append(f.times, tm)
				f.values = append(f.values, v)
			}
			frames = append(frames, f)
		}
		return resp.Data.ResultType, frames
	case "scalar":
		var p []any
		dec(resp.Data.Result, &p)
		tm, v := samplePair(t, p)
		return "scalar", []frame{{times: []time.Time{tm}, values: []float64{v}}}
	}
	t.Fatalf("unknown result type %q", resp.Data.ResultType)
	return "", nil
}

// samplePair reads [seconds, "value"] as Grafana's readTimeValuePair.
func samplePair(t *testing.T, p []any) (time.Time, float64) {
	t.Helper()
	if len(p) != 2 {
		t.Fatalf("sample %v: not a pair", p)
	}
	n, ok := p[0].(json.Number)
	s, ok2 := p[1].(string)
	if !ok || !ok2 {
		t.Fatalf("sample %v: want [number, string]", p)
	}
	secs, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("sample value %q: %v", s, err)
	}
	return time.UnixMilli(int64(secs * 1000)).UTC(), v
}

// newestFirst is a streams frame's lines, newest first, as Grafana
// shows them: it sorts the entries of every stream together by time.
func newestFirst(f frame) []string {
	idx := make([]int, len(f.lines))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return f.times[b].Compare(f.times[a]) })
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = f.lines[j]
	}
	return out
}

// seriesValues maps each series (by its labels) to its values.
func seriesValues(frames []frame) map[string][]float64 {
	out := map[string][]float64{}
	for _, f := range frames {
		out[fmt.Sprint(f.metric)] = f.values
	}
	return out
}
