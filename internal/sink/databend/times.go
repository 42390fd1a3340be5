package databend

import (
	"strconv"
	"time"

	"github.com/tracelake/tracelake/internal/schema"
)

// Databend's NDJSON reader takes an integer for a TIMESTAMP column by
// magnitude (formats field_decoder/json_ast.rs read_timestamp, expression
// utils/auto_detect_datetime.rs int64_to_timestamp): below 31,536,000,000
// as seconds, below 31,536,000,000,000 as milliseconds, only past that as
// microseconds. The declared tables' rows carry microseconds, so a time in
// 1970 (a device whose clock starts at the epoch, an OTLP time of a few
// nanoseconds) would be stored a thousand or a million times later. Such a
// value is staged as an RFC 3339 string in UTC instead, which the same
// reader parses as that instant whatever the session's time zone
// (read_timestamp's string branch, parse_timestamp_with_auto →
// types/timestamp.rs string_to_timestamp → common/io
// cursor_read_datetime_ext.rs: a trailing Z is an offset of zero).
const databendMicrosFrom = 31_536_000_000_000

// timestampColumns are the names of t's timestamp columns.
func timestampColumns(t *schema.Table) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, c := range t.AllColumns() {
		if c.Type == schema.Timestamp {
			out = append(out, c.Name)
		}
	}
	return out
}

// stageableTimes returns data (NDJSON rows of a declared table) with each
// top-level field named in cols whose integer Databend would not read as
// microseconds rewritten as an RFC 3339 UTC string with microseconds. data
// itself is returned when no row has one (the usual case: no copy).
func stageableTimes(data []byte, cols []string) []byte {
	if len(cols) == 0 {
		return data
	}
	var out []byte
	done := 0 // data[:done] is in out already
	for start := 0; start < len(data); {
		end := start
		for end < len(data) && data[end] != '\n' {
			end++
		}
		for _, v := range misreadTimes(data[start:end], cols) {
			n, _ := strconv.ParseInt(string(data[start+v[0]:start+v[1]]), 10, 64)
			if out == nil {
				out = make([]byte, 0, len(data)+64)
			}
			out = append(out, data[done:start+v[0]]...)
			out = append(out, '"')
			out = time.UnixMicro(n).UTC().AppendFormat(out, "2006-01-02T15:04:05.000000Z")
			out = append(out, '"')
			done = start + v[1]
		}
		start = end + 1
	}
	if out == nil {
		return data
	}
	return append(out, data[done:]...)
}

// misreadTimes returns the byte ranges, in line (one JSON object), of the
// integer values of its top-level fields named in cols that Databend would
// not read as microseconds. It scans the object's top level only (nested
// objects, such as attributes, may have keys of those names) and stops once
// it has seen every field of cols, which the decoders write near the
// start of a row.
func misreadTimes(line []byte, cols []string) [][2]int {
	var out [][2]int
	depth, seen, expectKey := 0, 0, false
	for i := 0; i < len(line) && seen < len(cols); i++ {
		switch c := line[i]; c {
		case '"':
			end := stringEnd(line, i)
			if depth != 1 || !expectKey {
				i = end
				continue
			}
			expectKey = false
			named := false
			for _, name := range cols {
				if string(line[i+1:end]) == name {
					named = true
					break
				}
			}
			j := end + 1
			for j < len(line) && (line[j] == ' ' || line[j] == ':') {
				j++
			}
			i = j - 1
			if !named {
				continue
			}
			seen++
			k := j
			for k < len(line) && (line[k] == '-' || line[k] >= '0' && line[k] <= '9') {
				k++
			}
			if k == j || k < len(line) && (line[k] == '.' || line[k] == 'e' || line[k] == 'E') {
				continue // null, or not an integer: left to Databend
			}
			if n, err := strconv.ParseInt(string(line[j:k]), 10, 64); err == nil && -databendMicrosFrom < n && n < databendMicrosFrom {
				out = append(out, [2]int{j, k})
			}
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		}
	}
	return out
}

// stringEnd is the index of the quote that ends the JSON string starting
// at line[i] (len(line)-1 for a string cut short).
func stringEnd(line []byte, i int) int {
	for j := i + 1; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(line) - 1
}
