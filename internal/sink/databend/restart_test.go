package databend_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// A databend-query node that restarts while a load's transaction is open
// on it loses the transaction (nothing of it committed) and comes back
// under a new node id: every databend-query process draws its node_id at
// start (src/query/config/src/inner.rs, InnerConfig::init:
// cfg.query.node_id = GlobalUniq::unique()). The load's next statement
// still names the old node in X-DATABEND-STICKY-NODE, and the session
// middleware answers HTTP 400 "Sticky session state lost: node '…' not
// found in cluster" (src/query/service/src/servers/http/middleware/
// session.rs, HTTPSessionEndpoint::call: HttpErrorCode::bad_request). This
// is a lost transaction like SessionLost 5111 or TransactionTimeout 4003,
// which the README says are retried ("lost or timed-out transactions …
// Retried with backoff"): a retry in a new session reads the ledger and
// loads the files once. tracelake takes the 400 for a statement the server
// cannot take and stops the run (sink.ErrFatal, exit 1) on a routine
// restart or rolling upgrade of the warehouse, even of a single node.
func TestNodeRestartMidTransactionIsRetried(t *testing.T) {
	srv, s := prepared(t, "")
	restarted := false
	srv.After = func(sql string) {
		// The load's ledger read ran in the transaction; the node restarts
		// before the COPY arrives.
		if !restarted && strings.HasPrefix(sql, `SELECT topic, "partition", max(last_offset) FROM`) {
			restarted = true
			srv.RestartNodeAtNextRequest(0)
		}
	}
	files := stage(t, s, batch(0, 0, 9))
	_, err := s.Load(context.Background(), files)
	if !restarted {
		t.Fatal("the node was not restarted during the load")
	}
	if err == nil {
		t.Fatal("the load reported success though its transaction was lost with the node")
	}
	t.Logf("first load: %v", err)
	if errors.Is(err, sink.ErrFatal) {
		t.Errorf("a node restart mid-transaction stops the run: %v; want a retryable error (the transaction is lost, nothing committed)", err)
	}
	if _, err := s.Load(context.Background(), files); err != nil {
		t.Fatalf("retry after the restart: %v", err)
	}
	if o := offsets(t, srv, 0); !slices.Equal(o, seq(0, 9)) {
		t.Errorf("offsets %v", o)
	}
}
