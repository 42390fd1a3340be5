package databend_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A load uploads its claim markers (and the pieces of files a former
// owner loaded in part) inside its transaction, between two of its
// statements, and databend-query drops a transaction left idle for the
// session's idle_transaction_timeout_secs (http_query_manager.rs
// add_txn). A DSN's idle_transaction_timeout_secs=1 was accepted (1 to
// 14400), and a marker upload of a second and a half then failed the
// load with TransactionTimeout, and every retry alike: nothing loaded.
// The sink must not open with a setting under which its loads fail.
func TestShortIdleTransactionTimeoutFailsNoLoad(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	s, err := databend.Open(options(srv, "idle_transaction_timeout_secs=1"))
	if err != nil {
		if !strings.Contains(err.Error(), "idle_transaction_timeout_secs") {
			t.Fatalf("open refused, not naming idle_transaction_timeout_secs: %v", err)
		}
		return // refused: no load runs under it
	}
	defer s.Close()
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() {
		srv.UploadStatus = func(path string) int {
			if strings.Contains(path, "/claim-") {
				time.Sleep(1500 * time.Millisecond) // a slow upload, the server's lock held: nothing else runs meanwhile
			}
			return 0
		}
	})
	if _, err := s.Load(context.Background(), stage(t, s, batch(0, 0, 9))); err != nil {
		t.Errorf("a load whose marker upload took 1.5 s, idle_transaction_timeout_secs=1 accepted: %v", err)
	}
}
