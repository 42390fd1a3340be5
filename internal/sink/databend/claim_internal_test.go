package databend

import (
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// The next claim number and the prune of each state a partition's claims
// can be read in, after an upgrade from a release that counted them.
func TestClaimNumbersAndPrune(t *testing.T) {
	tp := sink.TopicPartition{Topic: "traces", Partition: 0}
	f := func(name string, read claimsRead, next int64, prune string) {
		t.Helper()
		if got := read.next(); got != next {
			t.Errorf("%s: next claim %d, want %d", name, got, next)
		}
		if got := pruneSQL(`"f"`, map[sink.TopicPartition]claimsRead{tp: read}); got != prune {
			t.Errorf("%s: prune %q, want %q", name, got, prune)
		}
	}
	f("never claimed", claimsRead{}, 0, "")
	f("an older release's claims only", claimsRead{rows: 3}, 3, "")
	f("its highest only", claimsRead{rows: 1, past: 18}, 18, "")
	f("the first numbered claim above an older release's", claimsRead{rows: 4, past: 4}, 4,
		`DELETE FROM "f" WHERE (topic = 'traces' AND "partition" = 0 AND (claim < 3 OR claim IS NULL))`)
	f("numbered claims, some pruned", claimsRead{rows: 3, past: 18}, 18,
		`DELETE FROM "f" WHERE (topic = 'traces' AND "partition" = 0 AND (claim < 17 OR claim IS NULL))`)
	// An older release that ran beside this one (before a prune) counted
	// the rows and claimed past the highest numbered claim: its rows are
	// not all below that claim, and deleting any row would lower the
	// count its next claim is numbered by.
	f("an older release's claim past the highest", claimsRead{rows: 6, past: 5}, 6, "")
}
