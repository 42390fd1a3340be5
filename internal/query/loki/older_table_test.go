package loki

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestLokiOverAnOlderIcebergTable: `tracelake serve` of this release
// over an otel_logs table an older release's loader created and still
// writes, without the columns this release's Loki queries name
// (observed_time_unix_nano, time_unix_nano: a loader adds them when a
// loader of this release starts, which an operator upgrading the
// readers first has not done yet). Every Loki query failed with 400 (the
// column not found) until then; the read path reads a declared column
// the table lacks as NULL, and the records answer at their microsecond.
func TestLokiOverAnOlderIcebergTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	older := otel.Logs
	older.Columns = slices.DeleteFunc(slices.Clone(older.Columns), func(c schema.Column) bool {
		return c.Name == "observed_time_unix_nano" || c.Name == "time_unix_nano"
	})
	if len(older.Columns) != len(otel.Logs.Columns)-2 {
		t.Fatal("otel_logs no longer declares the columns this test leaves out")
	}
	snk, err := iceberg.Open(ctx, iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: otel.Logs.Name, Typed: &older})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	if err := snk.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	dec, err := otel.NewDecoder(otel.SignalLogs, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{}
	var rows int64
	for i, r := range lakeRecords {
		n, err := dec.AppendRows(b, &kgo.Record{Topic: "otlp", Offset: int64(i), Value: message(t, r),
			Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(r.tenant)}}})
		if err != nil {
			t.Fatal(err)
		}
		rows += int64(n)
	}
	b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "otlp"}, First: 0, Last: int64(len(lakeRecords) - 1), Records: rows}}
	sinktest.StageLoad(t, snk, b)

	reader, err := query.NewIceberg(ctx, snk.Catalog(), []query.IcebergTable{
		{Name: otel.Logs.Name, ID: table.Identifier{"tracelake", otel.Logs.Name}, Columns: duckdb.SinkColumns(duckdb.TypedColumns(&otel.Logs))},
	}, query.IcebergOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	mux := http.NewServeMux()
	if err := Register(mux, Options{Reader: reader, Tenants: tenancy.Resolver{Required: true}, Version: "test", Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="checkout"}`)))
	var got []string
	for _, f := range frames {
		got = append(got, f.lines...)
	}
	slices.Sort(got)
	want := []string{lakeRecords[0].body, lakeRecords[1].body, lakeRecords[2].body}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("checkout's lines: %q, want %q", got, want)
	}
	// Tenant b's record stays b's.
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(`{service_name="billing"}`)))
	for _, f := range frames {
		if len(f.lines) > 0 {
			t.Errorf("tenant a read tenant b's lines: %q", f.lines)
		}
	}
}
