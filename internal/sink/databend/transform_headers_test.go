package databend_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// In transform mode a record with headers stages and loads like one
// without: its transform row carries its headers before the value, and
// every header is {"key":…,"value":…}, so the value field must be found
// as the row's own last field, not as the first `,"value":` of the row
// (a header's). An object whose own fields include "value" keeps them.
func TestTransformModeLoadsRecordsWithHeaders(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.CreateTable("orders", []string{"id", "value"}, []string{"BIGINT", "VARCHAR"})
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 34, 56, 789_000_000, time.UTC)
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "orders"}, First: 0, Last: 2}
	for o, v := range []string{`{"id":1,"value":"a"}`, `{"id":"not a number"}`, `{"id":3}`} {
		rec := &kgo.Record{Topic: "orders", Offset: int64(o), Timestamp: at, Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("team-a")}, {Key: "value", Value: []byte(`,"value":`)}}}
		b.Rows = envelope.AppendTransformRow(b.Rows, rec, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	files := stage(t, s, b)
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range srv.Rows("orders") {
		v := ""
		if string(row["id"]) == "1" {
			v = "/" + string(row["value"])
		}
		got = append(got, string(row["id"])+v)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{`1/"a"`, `3`}) {
		t.Errorf("orders rows %v, want ids 1 (value a) and 3", got)
	}
	dl := srv.Rows("orders_dlq")
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want offset 1's", len(dl))
	}
	var hs []map[string]string
	if err := json.Unmarshal(dl[0]["headers"], &hs); err != nil || len(hs) != 2 || hs[0]["value"] != "team-a" || hs[1]["value"] != `,"value":` {
		t.Errorf("dead letter's headers %s (%v)", dl[0]["headers"], err)
	}
}
