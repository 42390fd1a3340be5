package loki

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tracelake/tracelake/internal/query/logql"
)

// Answers are shaped as Loki's (pkg/util/marshal/query.go,
// pkg/loghttp/query.go): {"status":"success","data":{...}}, streams'
// times as nanosecond strings, matrix and vector times as seconds,
// values as strings, label objects in label order.

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(body)
}

func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func appendLabels(b []byte, ls logql.Labels) []byte {
	b = append(b, '{')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, l.Name)
		b = append(b, ':')
		b = appendString(b, l.Value)
	}
	return append(b, '}')
}

// appendSeconds is a time as Prometheus writes a sample's: seconds with
// millisecond precision, a JSON number.
func appendSeconds(b []byte, ns int64) []byte {
	ms := ns / int64(time.Millisecond)
	return strconv.AppendFloat(b, float64(ms)/1000, 'f', -1, 64)
}

// appendPair is a sample: [seconds, "value"].
func appendPair(b []byte, ns int64, v float64) []byte {
	b = append(b, '[')
	b = appendSeconds(b, ns)
	b = append(b, ',')
	b = appendValue(b, v)
	return append(b, ']')
}

func appendValue(b []byte, v float64) []byte {
	b = append(b, '"')
	switch {
	case math.IsNaN(v):
		b = append(b, "NaN"...)
	case math.IsInf(v, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(v, -1):
		b = append(b, "-Inf"...)
	default:
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	return append(b, '"')
}

// queryBody is a query's answer.
func queryBody(res *logql.Result, categorized bool, took time.Duration) []byte {
	b := []byte(`{"status":"success","data":{"resultType":"`)
	b = append(b, res.Type...)
	b = append(b, '"')
	if categorized && res.Type == "streams" {
		b = append(b, `,"encodingFlags":["categorize-labels"]`...)
	}
	b = append(b, `,"result":`...)
	switch res.Type {
	case "streams":
		b = appendStreams(b, res.Streams, categorized)
	case "matrix":
		b = appendMatrix(b, res.Matrix)
	case "vector":
		b = appendVector(b, res.Vector)
	case "scalar":
		b = appendPair(b, res.Scalar.T, res.Scalar.V)
	}
	b = append(b, `,"stats":`...)
	b = appendStats(b, res, took)
	return append(b, "}}"...)
}

// appendArray writes n items as a JSON array, each by item.
func appendArray(b []byte, n int, item func(b []byte, i int) []byte) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = item(b, i)
	}
	return append(b, ']')
}

func appendMatrix(b []byte, m []logql.Series) []byte {
	return appendArray(b, len(m), func(b []byte, i int) []byte {
		b = append(b, `{"metric":`...)
		b = appendLabels(b, m[i].Labels)
		b = append(b, `,"values":`...)
		ps := m[i].Points
		b = appendArray(b, len(ps), func(b []byte, j int) []byte { return appendPair(b, ps[j].T, ps[j].V) })
		return append(b, '}')
	})
}

func appendVector(b []byte, v []logql.Sample) []byte {
	return appendArray(b, len(v), func(b []byte, i int) []byte {
		b = append(b, `{"metric":`...)
		b = appendLabels(b, v[i].Labels)
		b = append(b, `,"value":`...)
		b = appendPair(b, v[i].T, v[i].V)
		return append(b, '}')
	})
}

// appendStreams writes streams; categorized, each entry carries its
// structured metadata and parsed labels in a third element (an empty
// object when it has none), as Loki's encodeStream does.
func appendStreams(b []byte, streams []logql.Stream, categorized bool) []byte {
	return appendArray(b, len(streams), func(b []byte, i int) []byte {
		b = append(b, `{"stream":`...)
		b = appendLabels(b, streams[i].Labels)
		b = append(b, `,"values":`...)
		es := streams[i].Entries
		b = appendArray(b, len(es), func(b []byte, j int) []byte { return appendEntry(b, es[j], categorized) })
		return append(b, '}')
	})
}

func appendEntry(b []byte, e logql.StreamEntry, categorized bool) []byte {
	b = append(b, `["`...)
	b = strconv.AppendInt(b, e.TS, 10)
	b = append(b, `",`...)
	b = appendString(b, e.Line)
	if categorized {
		b = append(b, ",{"...)
		if len(e.Metadata) > 0 {
			b = append(b, `"structuredMetadata":`...)
			b = appendLabels(b, e.Metadata)
		}
		if len(e.Parsed) > 0 {
			if len(e.Metadata) > 0 {
				b = append(b, ',')
			}
			b = append(b, `"parsed":`...)
			b = appendLabels(b, e.Parsed)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendStats writes the summary of Loki's query statistics
// (pkg/logqlmodel/stats/stats.pb.go Summary), which Grafana shows in
// the query inspector: what was read and how fast.
func appendStats(b []byte, res *logql.Result, took time.Duration) []byte {
	secs := took.Seconds()
	per := func(n int64) int64 {
		if secs <= 0 {
			return 0
		}
		return int64(float64(n) / secs)
	}
	returned := int64(0)
	for _, s := range res.Streams {
		returned += int64(len(s.Entries))
	}
	summary := map[string]any{
		"bytesProcessedPerSecond": per(res.Bytes), "linesProcessedPerSecond": per(res.Entries),
		"totalBytesProcessed": res.Bytes, "totalLinesProcessed": res.Entries, "execTime": secs, "queueTime": 0,
		"subqueries": 0, "totalEntriesReturned": returned, "splits": 0, "shards": 0,
		"totalPostFilterLines": res.Entries, "totalStructuredMetadataBytesProcessed": 0,
	}
	js, _ := json.Marshal(map[string]any{"summary": summary})
	return append(b, js...)
}
