package databend

import "testing"

// Times Databend would read as seconds or milliseconds (those of 1970) are
// staged as their instant in RFC 3339; the others, nested fields of the
// same name, and values that are not integers are staged as they are.
func TestTimesOf1970AreStagedAsTheirInstant(t *testing.T) {
	cols := []string{"start_time", "end_time"}
	for in, want := range map[string]string{
		`{"a":"x","start_time":1000000,"end_time":86400000001}`:                     `{"a":"x","start_time":"1970-01-01T00:00:01.000000Z","end_time":"1970-01-02T00:00:00.000001Z"}`,
		`{"start_time":1764633600123456,"end_time":null}`:                           `{"start_time":1764633600123456,"end_time":null}`,
		`{"start_time":31535999999999,"end_time":31536000000000}`:                   `{"start_time":"1970-12-31T23:59:59.999999Z","end_time":31536000000000}`,
		`{"s":"\"start_time\":5,","attrs":{"start_time":5},"start_time":0}`:         `{"s":"\"start_time\":5,","attrs":{"start_time":5},"start_time":"1970-01-01T00:00:00.000000Z"}`,
		`{"k\"start_time":7,"end_time":1.5,"start_time":[1]}`:                       `{"k\"start_time":7,"end_time":1.5,"start_time":[1]}`,
		"{\"start_time\":1}\n{\"start_time\":2000000000000000}\n{\"end_time\":2}\n": "{\"start_time\":\"1970-01-01T00:00:00.000001Z\"}\n{\"start_time\":2000000000000000}\n{\"end_time\":\"1970-01-01T00:00:00.000002Z\"}\n",
	} {
		if got := string(stageableTimes([]byte(in), cols)); got != want {
			t.Errorf("%s\n  staged %s\n  want   %s", in, got, want)
		}
	}
	plain := []byte(`{"start_time":1764633600123456}` + "\n")
	if got := stageableTimes(plain, cols); &got[0] != &plain[0] {
		t.Error("rows without a time to rewrite were copied")
	}
}
