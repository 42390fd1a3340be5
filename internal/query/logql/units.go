package logql

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration as LogQL writes them: Go's (1h30m,
// 250ms, 1.5s, as label filters and unwrap duration() take them, Loki
// pkg/logql/log/label_filter.go) or Prometheus's with days, weeks and
// years (1d, 2w, as ranges take them, prometheus common/model
// ParseDuration).
func ParseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	var total time.Duration
	rest := s
	if rest == "" {
		return 0, fmt.Errorf("empty duration")
	}
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("not a valid duration string: %q", s)
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("not a valid duration string: %q", s)
		}
		rest = rest[i:]
		j := 0
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') {
			j++
		}
		var unit time.Duration
		switch rest[:j] {
		case "y":
			unit = 365 * 24 * time.Hour
		case "w":
			unit = 7 * 24 * time.Hour
		case "d":
			unit = 24 * time.Hour
		case "h":
			unit = time.Hour
		case "m":
			unit = time.Minute
		case "s":
			unit = time.Second
		case "ms":
			unit = time.Millisecond
		default:
			return 0, fmt.Errorf("not a valid duration string: %q", s)
		}
		total += time.Duration(n) * unit
		rest = rest[j:]
	}
	return total, nil
}

// byteUnits are the sizes humanize.ParseBytes takes (what Loki's bytes
// label filters and unwrap bytes() use), by lower-cased suffix.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
	"p": 1e15, "pb": 1e15, "pi": 1 << 50, "pib": 1 << 50,
}

// ParseBytes reads a byte size: 42, 20MB, 1.5 KiB.
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("not a byte size: %q", s)
	}
	mult, ok := byteUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("not a byte size: %q", s)
	}
	v := n * mult
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("byte size too large: %q", s)
	}
	return uint64(v), nil
}
