package iceberg_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/sink"
)

// Abandoning a failed load's positions (the OTLP receivers' sequence,
// after a load that committed its operations and not its spans) beside
// another instance that commits to the same spans table: that instance's
// commit landing between the abandonment's read of the spans table and its
// commit made the abandonment fail, and the request that started it was
// refused. Nothing retried the commit: every request the instance took was
// refused while the other instance kept committing (measured: 16 in a row
// over 26 s beside one busy instance), and clients drop what they retried
// for longer than their limit (the OTel SDK's one minute). A lost race is
// no reason to refuse: the abandonment reads the table again and commits
// again, as every other commit of the sink does.
func TestAbandonmentLosingARaceIsCommittedAgain(t *testing.T) {
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	forward := pastAHalfCommittedLoad(t, s, other)
	// The other instance commits to the spans table while the next
	// request abandons b's position: after the abandonment read the
	// table, before it commits.
	injected := false
	s.SetBeforeMaintenanceCommit(func() {
		if injected {
			return
		}
		injected = true
		loadSpansOfPartition1(t, other, 100)
	})
	for _, name := range []string{"c", "b"} { // another client's, and the retry
		if err := forward(name); err != nil {
			t.Errorf("request %s refused: %v", name, err)
		}
	}
	if !injected {
		t.Fatal("no commit of the other instance came during the abandonment: the race was not injected")
	}
	ops := operations(t, s)
	for _, want := range []string{"op a 1.000000000000", "op b 1.000000000000", "op c 1.000000000000"} {
		if n := len(slices.DeleteFunc(slices.Clone(ops), func(op string) bool { return op != want })); n != 1 {
			t.Errorf("operation %q stored %d times, want once: %v", want, n, ops)
		}
	}
	tp := sink.TopicPartition{Topic: directload.Topic("traces")}
	abandoned, err := s.Abandoned(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []sink.Run{{First: 1, Last: 1}}; !slices.Equal(abandoned[tp], want) {
		t.Errorf("abandoned %v, want %v", abandoned[tp], want)
	}
	if pos, err := s.Positions(context.Background(), []sink.TopicPartition{tp}); err != nil || pos[tp] != 4 {
		t.Errorf("position %v (%v), want 4: a, the abandoned b, c, b again", pos, err)
	}
}
