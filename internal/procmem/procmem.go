// Package procmem reads the process's resident memory (Linux), for
// benchmarks that report what a piece of work held at its peak: DuckDB's
// and iceberg-go's memory is not all Go's heap.
package procmem

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ResetPeak makes the process's peak resident memory (VmHWM) its current
// one (Linux: clear_refs 5); elsewhere it does nothing.
func ResetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// Peak is the process's peak resident memory in bytes since it started or
// since ResetPeak; 0 where the system does not say.
func Peak() int64 { return status("VmHWM:") }

// Resident is the process's resident memory in bytes now; 0 where the
// system does not say.
func Resident() int64 { return status("VmRSS:") }

// status is the field of /proc/self/status named by key, in bytes.
func status(key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
