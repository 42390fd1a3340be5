package databend_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
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
	srv, s := prepared(t, "")
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	values := []string{`{"o": 0}`, nested(126), nested(127), `{"a": ` + nested(300) + `}`, `{"o": 4}`}
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces", Partition: 0}, First: 0, Last: int64(len(values) - 1)}
	for i, v := range values {
		rec := &kgo.Record{Topic: "traces", Partition: 0, Offset: int64(i), Timestamp: time.Unix(1700000000, 0), Value: []byte(v)}
		id := [16]byte{byte(i)}
		b.Rows = envelope.AppendRawRow(b.Rows, rec, &id, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	loaded, err := s.Load(context.Background(), stage(t, s, b))
	if err != nil {
		t.Fatal(err)
	}
	var stored []int64
	for _, row := range srv.Rows("trace_raw") {
		var o int64
		_ = json.Unmarshal(row["koffset"], &o)
		stored = append(stored, o)
	}
	slices.Sort(stored)
	if !slices.Equal(stored, []int64{0, 1, 4}) {
		t.Errorf("raw table holds offsets %v, want 0, 1 and 4 (2 and 3 nest past serde_json's limit, which COPY refuses)", stored)
	}
	dlq := dlqRows(t, srv)
	for _, o := range []int64{2, 3} {
		var reason string
		_ = json.Unmarshal(dlq[o]["error"], &reason)
		if !strings.Contains(reason, "recursion limit exceeded") {
			t.Errorf("dead letter of offset %d: error %q, want serde_json's", o, reason)
		}
	}
	if len(dlq) != 2 {
		t.Errorf("%d dead letters, want 2", len(dlq))
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 3 || loaded.Ranges[0].DLQ != 2 {
		t.Errorf("loaded %+v, want 3 rows and 2 dead letters", loaded.Ranges)
	}
}
