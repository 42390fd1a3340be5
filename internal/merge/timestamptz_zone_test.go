package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// A timestamp without an offset into a TIMESTAMPTZ model column is read
// as UTC, never in the session's time zone (the machine's, by default):
// DuckDB's cast of the text reads it in that zone, so the same raw row
// was stored as another instant by a merge on a machine in another zone,
// and a rebuild or reconcile there disagreed with the target.
func TestModelReadsATimestampWithoutAnOffsetAsUTCInATimestamptzColumn(t *testing.T) {
	l := newRawLoader(t)
	l.add(0, []byte(`{"id":1,"ts":"2024-01-01T10:00:00"}`))
	l.add(0, []byte(`{"id":2,"ts":"2024-01-01T10:00:00+02:00"}`))
	l.add(0, []byte(`{"id":3,"ts":"2024-01-01"}`))
	l.flush()
	m := config.Model{Name: "events", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"},
		{Name: "ts", Path: "$.ts", Type: "TIMESTAMPTZ"},
	}}.WithDefaults("trace_raw")
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	want := []string{"1|1704103200", "2|1704096000", "3|1704067200"}
	for _, zone := range []string{"America/New_York", "Asia/Kolkata"} {
		if _, err := l.db().Exec(`SET GLOBAL TimeZone = '` + zone + `'`); err != nil {
			t.Fatal(err)
		}
		if _, err := mg.Rebuild(context.Background(), m, 0); err != nil {
			t.Fatal(err)
		}
		if got := dump(t, l.db(), `SELECT id, epoch(ts)::BIGINT FROM events`); !slices.Equal(got, want) {
			t.Errorf("in zone %s: events = %v, want %v (read in the session's zone)", zone, got, want)
		}
	}
}
