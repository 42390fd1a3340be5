package envelope

import (
	"os"
	"strings"
	"testing"
)

// The README's metrics table lists the reason label values of
// tracelake_dlq_records_total, which alerts group by: every kind a dead
// letter is counted under must be there.
func TestREADMEListsEveryDeadLetterReason(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "| `tracelake_dlq_records_total{reason}`") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("README has no metrics row for tracelake_dlq_records_total{reason}")
	}
	for _, kind := range []string{KindInvalidUTF8, KindInvalidJSON, KindTooDeep, KindNotObject, KindRejected, KindUndecodable} {
		if !strings.Contains(row, kind) {
			t.Errorf("README's tracelake_dlq_records_total row lacks the reason %q:\n%s", kind, row)
		}
	}
}
