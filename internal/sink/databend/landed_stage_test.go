package databend_test

import (
	"context"
	"testing"
)

// A load whose first attempt's COMMIT landed with its reply lost, retried
// with success (the ledger has its files: nothing is copied again), must
// leave the stage as a load that committed at once does (purge: true):
// the claim marker the first attempt copied and committed was named by
// no later load, and stayed in the stage for good, one for each lost
// reply.
func TestLostCommitReplyLeavesNoStagedFile(t *testing.T) {
	srv, s := prepared(t, "")
	first := firstTimeOnly()
	srv.DropReply = func(sql string) bool { return sql == "COMMIT" && first() }
	files := stage(t, s, batch(0, 0, 9, 4))
	if _, err := s.Load(context.Background(), files); err == nil {
		t.Fatal("load with a lost COMMIT reply reported success")
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(context.Background(), stage(t, s, batch(0, 10, 19))); err != nil {
		t.Fatal(err)
	}
	if left := srv.StageFiles(); len(left) != 0 {
		t.Errorf("the stage still holds %v", left)
	}
}
