package merge

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// A timestamp with a zone offset is the instant in UTC in every timestamp
// column without a zone, whatever its precision or spelling: DuckDB's cast
// of the text to TIMESTAMP_S, TIMESTAMP_MS, TIMESTAMP(3) or TIMESTAMP
// WITHOUT TIME ZONE drops the offset as its cast to TIMESTAMP does, and
// 10:00+02:00 was stored as 10:00, two hours off, without a reject.
func TestModelStoresATimestampWithAnOffsetInUTCAtEveryPrecision(t *testing.T) {
	for _, typ := range []string{"TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP(3)", "TIMESTAMP WITHOUT TIME ZONE", "TIMESTAMP_NS", "timestamp_ms",
		// MySQL's spelling of a precision, and the standard's with one:
		// DuckDB reads both (TIMESTAMP_MS, TIMESTAMP_S) and drops the
		// offset alike.
		"DATETIME(3)", "datetime(0)", "TIMESTAMP(3) WITHOUT TIME ZONE"} {
		t.Run(typ, func(t *testing.T) {
			l := newRawLoader(t)
			l.add(0, []byte(`{"id":1,"ts":"2024-01-01T10:00:00+02:00"}`))
			l.add(0, []byte(`{"id":2,"ts":"2024-01-01T10:00:00"}`))
			l.add(0, []byte(`{"id":3,"ts":"2024-01-01T10:00:00Z"}`))
			l.add(0, []byte(`{"id":4,"ts":"2024-01-01 23:30:00-0500"}`))
			l.flush()
			m := config.Model{Name: "events", Key: []string{"id"}, Columns: config.Columns{
				{Name: "id", Path: "$.id", Type: "BIGINT"},
				{Name: "ts", Path: "$.ts", Type: typ},
			}}.WithDefaults("trace_raw")
			if _, err := NewMerger(l.db(), slog.New(slog.DiscardHandler)).Merge(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			want := []string{"1|2024-01-01 08:00:00", "2|2024-01-01 10:00:00", "3|2024-01-01 10:00:00", "4|2024-01-02 04:30:00"}
			if got := dump(t, l.db(), `SELECT id, strftime(ts::TIMESTAMP, '%Y-%m-%d %H:%M:%S') FROM events`); !slices.Equal(got, want) {
				t.Errorf("events = %v, want %v (the offset dropped: the wrong instant stored)", got, want)
			}
		})
	}
	// TIMESTAMP(9) is TIMESTAMP_NS, whose cast honours the offset itself:
	// its nanoseconds are kept, not cut to the microsecond.
	l := newRawLoader(t)
	l.add(0, []byte(`{"id":1,"ts":"2024-01-01T10:00:00.123456789+02:00"}`))
	l.flush()
	m := config.Model{Name: "events", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"},
		{Name: "ts", Path: "$.ts", Type: "TIMESTAMP(9)"},
	}}.WithDefaults("trace_raw")
	if _, err := NewMerger(l.db(), slog.New(slog.DiscardHandler)).Merge(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, l.db(), `SELECT ts::VARCHAR FROM events`), []string{"2024-01-01 08:00:00.123456789"}; !slices.Equal(got, want) {
		t.Errorf("TIMESTAMP(9): %v, want %v", got, want)
	}
}
