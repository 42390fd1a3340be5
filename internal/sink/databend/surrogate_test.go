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

// A string escape of half a UTF-16 surrogate pair ("\ud800" alone, or
// "\udc00" first) is JSON by its grammar, and Kafka values holding one
// pass the pipeline's check, but COPY's NDJSON reader refuses the whole
// line: serde_json::from_slice validates a string's escapes and fails
// with LoneLeadingSurrogateInHexEscape or UnexpectedEndOfHexEscape
// (serde_json de.rs parse_escape; storages/stage read/row_based/formats/
// ndjson/block_builder.rs read_row). The row is dead-lettered with that
// reason and the rest of the file loaded; a pair in escapes loads.
func TestRawLoneSurrogateIsDeadLettered(t *testing.T) {
	srv, s := prepared(t, "")
	values := []string{`{"o": 0, "s": "\ud83d\ude00"}`, `{"o": 1, "s": "\ud800"}`, `{"o": 2, "s": "\udc00x"}`, `{"\ud800": 3}`, `{"o": 4, "s": "\\ud800"}`}
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
	if !slices.Equal(stored, []int64{0, 4}) {
		t.Errorf("raw table holds offsets %v, want 0 and 4 (1, 2 and 3 hold a lone surrogate escape, which COPY refuses)", stored)
	}
	dlq := dlqRows(t, srv)
	for _, o := range []int64{1, 2, 3} {
		var reason string
		_ = json.Unmarshal(dlq[o]["error"], &reason)
		if !strings.Contains(reason, "surrogate") && !strings.Contains(reason, "hex escape") {
			t.Errorf("dead letter of offset %d: error %q, want serde_json's", o, reason)
		}
	}
	if len(dlq) != 3 {
		t.Errorf("%d dead letters, want 3", len(dlq))
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 3 {
		t.Errorf("loaded %+v, want 2 rows and 3 dead letters", loaded.Ranges)
	}
}
