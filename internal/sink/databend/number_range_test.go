package databend_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A number past a double's range anywhere in a row (1e999, an integer of
// 400 digits): COPY's NDJSON reader parses the whole line with
// serde_json::from_slice before it reads any column (storages/stage
// read/row_based/formats/ndjson/block_builder.rs, read_row), and
// serde_json without arbitrary_precision refuses such a number
// (de.rs f64_from_parts: NumberOutOfRange, "number out of range"). So
// the row is rejected, not stored with a null or an infinity: tracelake
// dead-letters it with the reason, as sent, and loads the rest of the
// file once.
func TestRawNumberPastDoubleIsDeadLettered(t *testing.T) {
	srv, s := prepared(t, "")
	values := []string{`{"o": 0}`, `{"o": 1, "x": 1e999}`, `{"o": 2, "n": 1` + strings.Repeat("0", 400) + `}`, `{"o": 3, "y": [-1E+400]}`, `{"o": 4, "z": 0e999}`}
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
		t.Errorf("raw table holds offsets %v, want 0 and 4 (1, 2 and 3 hold numbers past a double, which COPY refuses)", stored)
	}
	dlq := dlqRows(t, srv)
	for _, o := range []int64{1, 2, 3} {
		row, ok := dlq[o]
		if !ok {
			t.Errorf("offset %d: no dead letter", o)
			continue
		}
		var reason, value string
		_ = json.Unmarshal(row["error"], &reason)
		_ = json.Unmarshal(row["value"], &value)
		v, _ := base64.StdEncoding.DecodeString(value)
		if !strings.Contains(reason, "number out of range") || !strings.Contains(string(v), fmt.Sprintf(`"o": %d`, o)) {
			t.Errorf("dead letter of offset %d: error %q, value %s", o, reason, v)
		}
	}
	if len(dlq) != 3 {
		t.Errorf("%d dead letters, want 3", len(dlq))
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 3 {
		t.Errorf("loaded %+v, want 2 rows and 3 dead letters", loaded.Ranges)
	}
}

// In transform mode COPY parses the whole object before it picks the
// columns' fields, so a number past a double's range in a field of no
// column rejects the row all the same (block_builder.rs read_row).
func TestTransformNumberPastDoubleInAnyFieldIsDeadLettered(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id"}, []string{"BIGINT"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10, `{"id": 1}`, `{"id": 2, "junk": 1e999}`, `{"id": 3}`)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range srv.Rows("orders") {
		ids = append(ids, string(r["id"]))
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"1", "3"}) {
		t.Errorf("stored ids %v, want 1 and 3", ids)
	}
	if n := len(srv.Rows("orders_dlq")); n != 1 {
		t.Errorf("%d dead letters, want 1 (offset 11)", n)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v, want 2 rows and 1 dead letter", loaded.Ranges)
	}
}
