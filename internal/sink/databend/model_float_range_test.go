package databend_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink"
)

// A model's FLOAT column given a number past its range (1e39) is rejected
// by a DuckDB model since 2026-12-07 (its cast would make it infinity).
// Databend's TRY_CAST of a variant to FLOAT (functions/src/scalars/
// variant.rs try_to_float32: to_f64, then num_traits::cast to f32, which
// saturates) makes it infinity too, and the Databend model merged that
// infinity, another value than the raw message, with no reject.
func TestDatabendModelRejectsANumberPastItsFloatColumn(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	values := []string{`{"id": 1, "f": 1.5}`, `{"id": 2, "f": 1e39}`, `{"id": 3, "f": -1e39}`, `{"id": 4, "f": 3.4028235e38}`}
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: 0, Last: int64(len(values)) - 1}
	for o, v := range values {
		rec := &kgo.Record{Topic: "traces", Offset: int64(o), Timestamp: time.Unix(1700000000, 0), Value: []byte(v)}
		id := [16]byte{0, 0, byte(o)}
		b.Rows = envelope.AppendRawRow(b.Rows, rec, &id, envelope.ValueJSON)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	if _, err := s.Load(ctx, stage(t, s, b)); err != nil {
		t.Fatal(err)
	}
	m := config.Model{Name: "readings", Target: "readings", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"id"},
		Columns: config.Columns{{Name: "id", Path: "$.id", Type: "BIGINT"}, {Name: "f", Path: "$.f", Type: "FLOAT"}}}.WithDefaults("trace_raw")
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, row := range srv.Rows("readings") {
		ids = append(ids, string(row["id"])+"|"+string(row["f"]))
	}
	sort.Strings(ids)
	if len(ids) != 2 || !slices.ContainsFunc(ids, func(s string) bool { return s[:2] == "1|" }) || !slices.ContainsFunc(ids, func(s string) bool { return s[:2] == "4|" }) {
		t.Errorf("model rows %v, want ids 1 and 4 (1e39 and -1e39 rejected, as a DuckDB model rejects them)", ids)
	}
	if n := len(srv.Rows("readings_rejects")); n != 2 {
		t.Errorf("%d rejects, want 2", n)
	}
}
