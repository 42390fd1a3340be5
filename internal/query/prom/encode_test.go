package prom

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestResultJSON: results are written as Prometheus writes them
// (web/api/v1/json_codec_test.go's cases): seconds with the milliseconds
// as written digits, values as strings in Prometheus's float format.
func TestResultJSON(t *testing.T) {
	f := func(v parser.Value, want string) {
		t.Helper()
		got, err := queryData{ResultType: v.Type(), Result: v}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	m := labels.FromStrings("__name__", "up", "job", `a"b`)
	f(promql.Matrix{{Metric: m, Floats: []promql.FPoint{{T: 1435781451781, F: 1}, {T: 1000050, F: 1e-7}, {T: -1500, F: math.Inf(1)}}}},
		`{"resultType":"matrix","result":[{"metric":{"__name__":"up","job":"a\"b"},"values":[[1435781451.781,"1"],[1000.050,"1e-07"],[-1.500,"+Inf"]]}]}`)
	f(promql.Vector{{Metric: m, T: 5, F: math.NaN()}, {Metric: labels.EmptyLabels(), T: 2000, F: 1e21}},
		`{"resultType":"vector","result":[{"metric":{"__name__":"up","job":"a\"b"},"value":[0.005,"NaN"]},{"metric":{},"value":[2,"1e+21"]}]}`)
	f(promql.Matrix{}, `{"resultType":"matrix","result":[]}`)
	f(promql.Scalar{T: 1000, V: -0.5}, `{"resultType":"scalar","result":[1,"-0.5"]}`)
	f(promql.String{T: 1000, V: "x"}, `{"resultType":"string","result":[1,"x"]}`)
}
