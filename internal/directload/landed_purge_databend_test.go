package directload

import (
	"strings"
	"testing"
)

// A load every attempt of which fails, the first one's COMMIT having
// landed with its reply lost (every COMMIT's reply is dropped here), is
// answered stored: the ledger holds its positions under its own identity
// (Sink.LoadedAs). Its staged files must then go as a committed load's
// do (README "Databend": with purge, the files are removed after the
// commit): no attempt succeeded to purge them, and the file stayed in
// the stage, its lines held in the sink's memory, for good.
func TestDatabendLandedLoadFoundAfterItsAttemptsFailedLeavesNoStagedFile(t *testing.T) {
	srv, s := databendSpans(t, true)
	srv.Set(func() {
		srv.DropReply = func(sql string) bool { return strings.HasPrefix(sql, "COMMIT") }
	})
	l := startGenAILoader(t, s)
	bodies, spans := requestBodies(t, 1)
	if err := forward(l, bodies[0]); err != nil {
		t.Fatalf("answered %v, yet the first attempt's commit landed", err)
	}
	if n := len(srv.Rows("otel_spans")); n != spans {
		t.Fatalf("%d spans stored, want %d", n, spans)
	}
	if files := srv.StageFiles(); len(files) != 0 {
		t.Errorf("the stage still holds %v after the load was found landed (purge: true)", files)
	}
}
