package iceberg

import (
	"fmt"
	"math"
	"strconv"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eventTimer reads a record's event time, the raw table's event_time (by
// whose day it is partitioned): the value's field at a JSON path
// (sink.iceberg.partition_by), so that a backlog replayed today lands in
// the days its events belong to; without a path, or where the value holds
// no time there, the record's Kafka timestamp.
type eventTimer struct{ path *gojson.Path }

// newEventTimer compiles path ("" for the Kafka timestamp alone);
// configuration checked it is a JSON path to one field.
func newEventTimer(path string) (eventTimer, error) {
	if path == "" {
		return eventTimer{}, nil
	}
	p, err := gojson.CreatePath(path)
	if err != nil {
		return eventTimer{}, fmt.Errorf("JSON path %q: %w", path, err)
	}
	return eventTimer{p}, nil
}

func (e eventTimer) at(r *kgo.Record) time.Time {
	if e.path != nil {
		if found, err := e.path.Extract(r.Value); err == nil && len(found) == 1 {
			if t, ok := parseEventTime(found[0]); ok {
				return t
			}
		}
	}
	return r.Timestamp
}

// parseEventTime reads a JSON value as a time: an RFC 3339 string, or a
// number of seconds, milliseconds, microseconds or nanoseconds since the
// Unix epoch, told apart by magnitude (as seconds, 10^11 is the year 5138;
// as milliseconds, 1973).
func parseEventTime(raw []byte) (time.Time, bool) {
	if len(raw) > 1 && raw[0] == '"' {
		s, err := strconv.Unquote(string(raw))
		if err != nil {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		// Whole numbers exactly: as a float, nanoseconds lose precision.
		// The magnitude is unsigned: -n of int64's most negative is
		// itself, which read it as seconds.
		a := uint64(n)
		if n < 0 {
			a = -a
		}
		switch {
		case a < 1e11:
			return time.Unix(n, 0).UTC(), true
		case a < 1e14:
			return time.UnixMilli(n).UTC(), true
		case a < 1e17:
			return time.UnixMicro(n).UTC(), true
		default:
			return time.Unix(0, n).UTC(), true
		}
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return time.Time{}, false
	}
	scale := 1e9 // to nanoseconds
	for _, limit := range []float64{1e11, 1e14, 1e17} {
		if math.Abs(v) < limit {
			break
		}
		scale /= 1000
	}
	ns := v * scale
	if math.Abs(ns) >= math.MaxInt64 {
		return time.Time{}, false
	}
	// A float's last digits are noise: to the column's microseconds.
	return time.Unix(0, int64(ns)).Round(time.Microsecond).UTC(), true
}
