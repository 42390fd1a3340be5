package databend_test

import (
	"strings"
	"testing"
)

// COPY's NDJSON reader parses a line with serde_json::from_slice
// (storages/stage read/row_based/formats/ndjson/block_builder.rs,
// read_row), whose recursion limit (128: de.rs Deserializer::new,
// remaining_depth; the unbounded_depth feature only makes
// disable_recursion_limit available, which COPY never calls) refuses a
// line nested 128 deep: a raw row's value nested 127 deep (inside the
// row's object) is rejected, with "recursion limit exceeded", and
// dead-lettered; the rest of the file loads, a value nested 126 deep too.
func TestRawValueNestedPastSerdesLimitIsDeadLettered(t *testing.T) {
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	wantRefused(t, []string{`{"o": 0}`, nested(126), nested(127), `{"a": ` + nested(300) + `}`, `{"o": 4}`}, []int64{2, 3}, "recursion limit exceeded")
}
