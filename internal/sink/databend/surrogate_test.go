package databend_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// A string escape of half a UTF-16 surrogate pair ("\ud800" alone, or
// "\udc00" first) is JSON by its grammar, and Kafka values holding one
// pass the pipeline's check, but COPY's NDJSON reader refuses the whole
// line: serde_json::from_slice validates a string's escapes and fails
// with LoneLeadingSurrogateInHexEscape or UnexpectedEndOfHexEscape
// (serde_json de.rs parse_escape; storages/stage read/row_based/formats/
// ndjson/block_builder.rs read_row). The row is dead-lettered with that
// reason and the rest of the file loaded; a pair in escapes loads.
func TestRawLoneSurrogateIsDeadLettered(t *testing.T) {
	wantRefused(t, []string{`{"o": 0, "s": "\ud83d\ude00"}`, `{"o": 1, "s": "\ud800"}`, `{"o": 2, "s": "\udc00x"}`, `{"\ud800": 3}`, `{"o": 4, "s": "\\ud800"}`},
		[]int64{1, 2, 3}, "surrogate", "hex escape")
}

// wantRefused loads values in raw mode (loadRawValues) and checks that
// the rows at offsets refused are dead-lettered, each with an error
// holding one of reasons (COPY refused the line), and every other row is
// stored, once.
func wantRefused(t *testing.T, values []string, refused []int64, reasons ...string) {
	t.Helper()
	srv, loaded, rows := loadRawValues(t, values...)
	var want []int64
	for o := range int64(len(values)) {
		if !slices.Contains(refused, o) {
			want = append(want, o)
		}
	}
	stored := slices.Sorted(maps.Keys(rows))
	if !slices.Equal(stored, want) {
		t.Errorf("raw table holds offsets %v, want %v (COPY refuses %v)", stored, want, refused)
	}
	dlq := dlqRows(t, srv)
	for _, o := range refused {
		var reason string
		_ = json.Unmarshal(dlq[o]["error"], &reason)
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(reason, r) }) {
			t.Errorf("dead letter of offset %d: error %q, want one holding %q", o, reason, reasons)
		}
	}
	if len(dlq) != len(refused) {
		t.Errorf("%d dead letters, want %d", len(dlq), len(refused))
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != int64(len(want)) || loaded.Ranges[0].DLQ != int64(len(refused)) {
		t.Errorf("loaded %+v, want %d rows and %d dead letters", loaded.Ranges, len(want), len(refused))
	}
}
