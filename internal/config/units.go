package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads "10s", "5m" or "1h30m" from YAML,
// JSON strings and the environment.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration the way it is read back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// durationWanted and sizeWanted say what a Duration and a ByteSize accept,
// in their own errors and in the loader's when a key is given a list or
// a mapping.
const (
	durationWanted = "a duration such as 10s, 5m or 1h"
	sizeWanted     = "a size such as 16MiB, 512KiB or 1GB (at most 2^63-1 bytes)"
)

// UnmarshalText parses a Go duration string ("10s", "1m30s").
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("want %s, got %q", durationWanted, b)
	}
	*d = Duration(v)
	return nil
}

// ByteSize is a size in bytes that reads "16MiB", "512KiB", "1GB" or a plain
// number of bytes.
type ByteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

func (s ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s >= ByteSize(u.mult) && int64(s)%u.mult == 0 {
			return strconv.FormatInt(int64(s)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// MarshalText writes the size the way it is read back.
func (s ByteSize) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses "16MiB", "1GB", "4096".
func (s *ByteSize) UnmarshalText(b []byte) error {
	str := strings.TrimSpace(string(b))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(str, u.suffix) {
			str, mult = strings.TrimSpace(strings.TrimSuffix(str, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(str, 10, 64)
	// n > MaxInt64/mult: the product would wrap around (2^64 bytes read
	// as 0, which some keys take as "derived").
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return fmt.Errorf("want %s, got %q", sizeWanted, b)
	}
	*s = ByteSize(n * mult)
	return nil
}
