package merge

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/config"
)

// An offset with seconds (+05:21:10, as Python's and Java's ISO writers
// give a zone's local mean time before 1906) is an offset like any other:
// DuckDB's cast to TIMESTAMPTZ honours it, its cast to TIMESTAMP (and
// every zoneless type but TIMESTAMP_NS) drops it. The offset pattern knew
// only hours and minutes, so such a text was stored as written in a
// TIMESTAMP column and read as UTC into a TIMESTAMPTZ one: the wrong
// instant, without a reject, and another than TIMESTAMP_NS stored.
func TestModelStoresATimestampWithAnOffsetInSecondsAsItsInstant(t *testing.T) {
	const layout = "2006-01-02T15:04:05-07:00:00"
	texts := []string{"1900-01-01T10:00:00+05:21:10", "1883-11-18T11:00:00-04:56:02", "2024-01-01T10:00:00.5+02:00:30"}
	l := newRawLoader(t)
	if _, err := l.db().Exec(`SET GLOBAL TimeZone = 'Asia/Kolkata'`); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, s := range texts {
		l.add(0, fmt.Appendf(nil, `{"id":%d,"ts":%q}`, i, s))
		at, err := time.Parse(layout, s)
		if err != nil {
			t.Fatal(err)
		}
		us := at.UnixMicro()
		want = append(want, fmt.Sprintf("%d|%d|%d|%d|%d", i, us, us, us/1000, us))
	}
	l.flush()
	m := config.Model{Name: "events", Key: []string{"id"}, Columns: config.Columns{
		{Name: "id", Path: "$.id", Type: "BIGINT"},
		{Name: "tz", Path: "$.ts", Type: "TIMESTAMPTZ"},
		{Name: "ts", Path: "$.ts", Type: "TIMESTAMP"},
		{Name: "ms", Path: "$.ts", Type: "TIMESTAMP_MS"},
		{Name: "ns", Path: "$.ts", Type: "TIMESTAMP_NS"},
	}}.WithDefaults("trace_raw")
	if _, err := NewMerger(l.db(), slog.New(slog.DiscardHandler)).Merge(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := dump(t, l.db(), `SELECT id, epoch_us(tz), epoch_us(ts), epoch_ms(ms), epoch_us(ns) FROM events ORDER BY id`)
	if !slices.Equal(got, want) {
		t.Errorf("id|tz|ts|ms|ns (µs, ms) = %v, want %v (the offset's seconds part dropped the offset)", got, want)
	}
}
