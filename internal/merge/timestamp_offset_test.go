package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// A timestamp with a zone offset into a TIMESTAMP column is the instant in
// UTC: DuckDB's cast of the text drops the offset (10:00+02:00 as 10:00).
// One without an offset is kept as written, whatever the session's zone.
func TestModelStoresATimestampWithAnOffsetInUTC(t *testing.T) {
	ctx := context.Background()
	l := newRawLoader(t)
	if _, err := l.db().Exec(`SET GLOBAL TimeZone = 'America/New_York'`); err != nil {
		t.Fatal(err)
	}
	l.add(0, []byte(`{"id":1,"ts":"2024-01-01T10:00:00+02:00"}`))
	l.add(0, []byte(`{"id":2,"ts":"2024-01-01T10:00:00"}`))
	l.add(0, []byte(`{"id":3,"ts":"2024-01-01T10:00:00Z"}`))
	l.flush()
	m := config.Model{Name: "events", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"},
		{Name: "ts", Path: "$.ts", Type: "TIMESTAMP"},
	}}.WithDefaults("trace_raw")
	if _, err := NewMerger(l.db(), slog.New(slog.DiscardHandler)).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	want := []string{"1|2024-01-01 08:00:00", "2|2024-01-01 10:00:00", "3|2024-01-01 10:00:00"}
	if got := dump(t, l.db(), `SELECT id, ts::VARCHAR FROM events`); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}
