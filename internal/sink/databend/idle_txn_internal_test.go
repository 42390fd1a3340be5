package databend

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// databend-query drops a transaction idle_transaction_timeout_secs after
// a statement left it open (http_query_manager.rs add_txn): with 0,
// before the next statement of its session, whose statements then fail.
// An administrator's SET GLOBAL of 0 leaves the sink's transactions
// alone (its sessions send their own value, settings.go); a session that
// sent 0, as one from a DSN setting it did before such a DSN was refused,
// has every transaction fail.
func TestIdleTransactionTimeoutOfZeroDropsTransactions(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.Set(func() {
		srv.GlobalSettings = map[string]string{"idle_transaction_timeout_secs": "0"}
		srv.Accept = func(sql string) bool { return strings.HasPrefix(sql, "UPDATE") }
	})
	s, err := Open(Options{DSN: srv.DSN(""), Table: "trace_raw", Stage: "~", Uploads: 1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.ExecTx(ctx, "UPDATE w SET x = 1"); err != nil {
		t.Errorf("a transaction under SET GLOBAL idle_transaction_timeout_secs = 0: %v", err)
	}
	var base map[string]any
	if err := json.Unmarshal(s.c.base, &base); err != nil {
		t.Fatal(err)
	}
	base["settings"].(map[string]any)["idle_transaction_timeout_secs"] = "0"
	if s.c.base, err = json.Marshal(base); err != nil {
		t.Fatal(err)
	}
	if err := s.ExecTx(ctx, "UPDATE w SET x = 1"); err == nil || !strings.Contains(err.Error(), "Transaction timeout") {
		t.Errorf("a transaction of a session sending idle_transaction_timeout_secs 0: error %v, want its transaction dropped", err)
	}
}
