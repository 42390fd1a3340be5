package cdc

import (
	"encoding/json"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
)

// benchEvent is a ~1 KB event: a fixture with a text value of its row
// grown to reach it.
func benchEvent(b *testing.B, path string) fixture {
	b.Helper()
	f := readFixture(&testing.T{}, path)
	pad := strings.Repeat("y", max(0, 1024-len(f.value)))
	for _, short := range []string{`"Anne Marie"`, `"name":"b"`} {
		long := short[:len(short)-1] + pad + `"`
		f.value = []byte(strings.Replace(string(f.value), short, long, 1))
	}
	return f
}

func benchDecode(b *testing.B, path string) {
	f := benchEvent(b, path)
	d, err := NewDecoder(Options{Format: f.format})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(f.value)))
		b.ReportAllocs()
		var changes []Change
		for b.Loop() {
			if changes, err = d.Decode(changes[:0], f.topic, f.key, f.value); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	// The yardsticks: validating the JSON, the least a decoder does, and
	// unmarshalling it into a map (what a generic decoder does).
	b.Run("gojson_valid", func(b *testing.B) {
		b.SetBytes(int64(len(f.value)))
		b.ReportAllocs()
		for b.Loop() {
			if !gojson.Valid(f.value) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("json_unmarshal_map", func(b *testing.B) {
		b.SetBytes(int64(len(f.value)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(string(f.value)))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeDebezium: an update with its before image, schemas off
// (~1 KB).
func BenchmarkDecodeDebezium(b *testing.B) {
	benchDecode(b, "testdata/debezium_mysql_update_noschema.txt")
}

// BenchmarkDecodeCanal: an insert of two typed rows (~1 KB).
func BenchmarkDecodeCanal(b *testing.B) { benchDecode(b, "testdata/canal_insert.txt") }
