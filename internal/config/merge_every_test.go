package config

import "testing"

// A negative merge.every is one error, its range: it was also reported
// as "set but merge.models is empty", two errors for one mistake.
func TestNegativeMergeEveryIsOneError(t *testing.T) {
	for _, y := range []string{
		"kafka: {topics: [t]}\nmerge: {every: -1s}",
		"kafka: {topics: [t]}\nmerge: {every: -1s}\nsink: {type: iceberg}",
	} {
		_, err := loadChecked(t, y)
		if err == nil || err.Error() != "merge.every: want 0 (off) to 24h, got -1s" {
			t.Errorf("%s: error %v, want merge.every's range alone", y, err)
		}
	}
}
