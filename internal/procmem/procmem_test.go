package procmem

import (
	"runtime"
	"testing"
)

// The peak follows memory the process touches, and ResetPeak brings it
// back to what is resident now.
func TestPeakFollowsResidentMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	ResetPeak()
	before := Peak()
	if before <= 0 || Resident() <= 0 {
		t.Fatalf("peak %d, resident %d: not read", before, Resident())
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	if grew := Peak() - before; grew < 32<<20 {
		t.Errorf("the peak grew by %d bytes after touching 64 MiB", grew)
	}
	runtime.KeepAlive(b)
}
