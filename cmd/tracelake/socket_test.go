package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// servedSink opens a DuckDB sink on a file in dir (raw mode, table
// events, two tenants' rows in a table with tenant_id) and serves run's
// socket for it, as `tracelake run` does; the log is returned.
func servedSink(t *testing.T, dir string) (*config.Config, *bytes.Buffer) {
	t.Helper()
	cfg := config.Default()
	cfg.Sink.Table = "events"
	cfg.Sink.DuckDB.Path = filepath.Join(dir, "t.duckdb")
	snk := openPrepared(t, cfg)
	for _, q := range []string{
		`CREATE TABLE spans (tenant_id VARCHAR, name VARCHAR)`,
		`INSERT INTO spans VALUES ('a', 'a1'), ('a', 'a2'), ('b', 'b1')`,
		`CREATE TABLE spans_copy AS SELECT * FROM spans WHERE name <> 'b1'`,
	} {
		if _, err := snk.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	reader, err := query.NewDuckDB(context.Background(), snk.DB(), query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveCommands(context.Background(), []loadTarget{{cfg, snk}}, reader, slog.New(slog.NewTextHandler(&log, nil)))
	t.Cleanup(stop)
	return cfg, &log
}

// ask runs args through the socket beside cfg's database and returns
// what the command printed and its exit code.
func ask(t *testing.T, cfg *config.Config, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := throughRun(context.Background(), heldError{path: cfg.Sink.DuckDB.Path, err: duckdb.ErrLocked}, args, &out)
	code, msg := exitStatus(err)
	return out.String() + msg, code
}

// Commands asked on the socket run inside the process on its sink: sql
// through the read path (a tenant's rows alone, qualified names refused),
// dlq list; a command that writes the tables and a client whose config
// names another database are refused; the socket is its owner's alone
// and gone after the stop.
func TestCommandsOnTheSocket(t *testing.T) {
	dir := t.TempDir()
	cfg, log := servedSink(t, dir)
	sock := socketPath(cfg.Sink.DuckDB.Path)
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatalf("no socket: %v\n%s", err, log)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	f := func(want string, wantCode int, args ...string) {
		t.Helper()
		out, code := ask(t, cfg, args...)
		if code != wantCode || !strings.Contains(out, want) {
			t.Errorf("%q: exit %d, want %d, output:\n%s\nwant %q", args, code, wantCode, out, want)
		}
	}
	f("n  tenants\n3  2\n(1 rows)\n", exitOK, "sql", "SELECT count(*) AS n, count(DISTINCT tenant_id) AS tenants FROM spans")
	f("n  tenants\n2  1\n(1 rows)\n", exitOK, "sql", "--tenant", "a", "SELECT count(*) AS n, count(DISTINCT tenant_id) AS tenants FROM spans")
	f("query refused", exitFailed, "sql", "--tenant", "a", "SELECT count(*) FROM main.spans")
	f("query refused", exitFailed, "sql", "SELECT * FROM read_csv('/etc/passwd')")
	f("--tenant:", exitUsage, "sql", "--tenant", "a/b", "SELECT 1")
	f("(0 rows)", exitOK, "dlq", "list", "--config", "ignored.yaml")
	// A failed check exits 1 through the socket as it does standalone.
	f("only in spans: 1", exitFailed, "reconcile", "--left", "spans", "--right", "spans_copy", "--key", "name")
	f("EQUAL", exitOK, "reconcile", "--left", "spans", "--right", "spans", "--key", "name")
	f("reconcile: give --left T1 --right T2 --key K, --model M", exitUsage, "reconcile")
	f("flag provided but not defined: -nope", exitUsage, "verify", "--nope")
	f("dlq replay does not go through tracelake run", exitUsage, "dlq", "replay")
	f("merge does not go through tracelake run", exitUsage, "merge")

	other := *cfg
	other.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "other.duckdb")
	if err := os.WriteFile(other.Sink.DuckDB.Path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = throughRun(context.Background(), heldError{path: other.Sink.DuckDB.Path, err: duckdb.ErrLocked}, []string{"sql", "SELECT 1"}, &out)
	if err == nil || !strings.Contains(err.Error(), "there is no socket") {
		t.Errorf("no socket beside the other database: %v", err)
	}
	// A link to the socket beside another database is not asked: only a
	// socket of the user's own is.
	if err := os.Symlink(sock, socketPath(other.Sink.DuckDB.Path)); err != nil {
		t.Fatal(err)
	}
	if err := throughRun(context.Background(), heldError{path: other.Sink.DuckDB.Path, err: duckdb.ErrLocked}, []string{"sql", "SELECT 1"}, &out); err == nil ||
		!strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("a link in place of the socket was asked: %v", err)
	}
	// A client whose config names another database is refused.
	body, _ := json.Marshal(commandRequest{Args: []string{"sql", "SELECT 1"}, Database: other.Sink.DuckDB.Path})
	resp, err := socketClient(sock).Post("http://tracelake/v1/command", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	msg, _ := strconv.Unquote(resp.Trailer.Get(trailerError))
	if resp.Trailer.Get(trailerExit) != "2" || len(text) != 0 || !strings.Contains(msg, "names the database") {
		t.Errorf("another database: exit %q, output %q, error %q", resp.Trailer.Get(trailerExit), text, msg)
	}
}

// The socket goes away with the stop; a socket path over the limit, or
// one something already answers on, leaves run without a socket and says
// so once; a stale socket (nothing answers) is replaced.
func TestSocketPath(t *testing.T) {
	t.Run("removed at stop", func(t *testing.T) {
		cfg := config.Default()
		cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "t.duckdb")
		snk, err := openDuckDB(cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		defer snk.Close()
		stop := serveCommands(context.Background(), []loadTarget{{cfg, snk}}, nil, slog.New(slog.DiscardHandler))
		if _, err := os.Stat(socketPath(cfg.Sink.DuckDB.Path)); err != nil {
			t.Fatal(err)
		}
		stop()
		if _, err := os.Stat(socketPath(cfg.Sink.DuckDB.Path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket is still there after the stop: %v", err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketPath))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, log := servedSink(t, dir)
		if strings.Count(log.String(), "no local socket") != 1 || !strings.Contains(log.String(), "over the") {
			t.Errorf("log:\n%s", log)
		}
		if _, err := os.Lstat(filepath.Join(dir, "t.duckdb.sock")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a socket past the limit: %v", err)
		}
	})
	t.Run("stale", func(t *testing.T) {
		dir := t.TempDir()
		lis, err := net.Listen("unix", filepath.Join(dir, "t.duckdb.sock"))
		if err != nil {
			t.Fatal(err)
		}
		lis.(*net.UnixListener).SetUnlinkOnClose(false)
		lis.Close() // a run killed -9 leaves its socket so
		cfg, log := servedSink(t, dir)
		if out, code := ask(t, cfg, "sql", "SELECT 42 AS answer"); code != exitOK || !strings.Contains(out, "42") {
			t.Errorf("after a stale socket: exit %d\n%s\n%s", code, out, log)
		}
	})
	t.Run("answered", func(t *testing.T) {
		dir := t.TempDir()
		lis, err := net.Listen("unix", filepath.Join(dir, "t.duckdb.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		_, log := servedSink(t, dir)
		if !strings.Contains(log.String(), "something answers on") {
			t.Errorf("log:\n%s", log)
		}
		if _, err := os.Lstat(filepath.Join(dir, "t.duckdb.sock")); err != nil {
			t.Errorf("the other listener's socket was removed: %v", err)
		}
	})
}

// TestRunningForNamesTablesAsDuckDB: a client's sink.table names run's
// tables as DuckDB does, without regard to case: OTEL_LOGS is the logs
// table otlp.signals loads, not run's own (whose rows a command such as
// verify would then report as the logs').
func TestRunningForNamesTablesAsDuckDB(t *testing.T) {
	traces, logs := &config.Config{}, &config.Config{}
	traces.Sink.Table, logs.Sink.Table = "otel_spans", "otel_logs"
	s := &commandServer{running: []*runningSink{{cfg: traces}, {cfg: logs}}}
	for table, want := range map[string]*config.Config{"otel_logs": logs, "OTEL_LOGS": logs, "Otel_Spans": traces, "": traces} {
		got, err := s.runningFor(table, true)
		if err != nil {
			t.Fatalf("runningFor(%q): %v", table, err)
		}
		if got.cfg != want {
			t.Errorf("runningFor(%q) is %s's, want %s's", table, got.cfg.Sink.Table, want.Sink.Table)
		}
	}
}

// A client whose config names a table run does not load is refused, not
// answered with run's own table: verify would check run's table and say
// OK about the one asked.
func TestCommandForATableRunDoesNotLoadIsRefused(t *testing.T) {
	cfg, _ := servedSink(t, t.TempDir())
	var out bytes.Buffer
	held := heldError{path: cfg.Sink.DuckDB.Path, table: "orders", err: duckdb.ErrLocked}
	err := throughRun(context.Background(), held, []string{"verify"}, &out)
	code, msg := exitStatus(err)
	if code != exitUsage || !strings.Contains(msg, `sink.table "orders"`) || !strings.Contains(msg, "events") {
		t.Errorf("verify of a table run does not load: exit %d, %q, output %q", code, msg, out.String())
	}
	// sql reads the tables it names, whichever the config's is.
	if err := throughRun(context.Background(), held, []string{"sql", "SELECT 1 AS one"}, &out); err != nil {
		t.Errorf("sql with a config of another table: %v", err)
	}
	held.table = "EVENTS" // run's own, named in another case
	if _, code := ask(t, cfg, "sql", "SELECT 1 AS one"); code != exitOK {
		t.Errorf("run's own table refused: exit %d", code)
	}
	if err := throughRun(context.Background(), held, []string{"sql", "SELECT 1 AS one"}, &out); err != nil {
		t.Errorf("run's own table, named in another case: %v", err)
	}
}

// A query of more than a mebibyte (a long IN list, as tools generate) is
// answered through the socket as it is on a stopped file.
func TestLongQueryThroughTheSocket(t *testing.T) {
	cfg, _ := servedSink(t, t.TempDir())
	var in strings.Builder
	in.WriteString("SELECT count(*) AS n FROM spans WHERE name IN ('a1'")
	for i := 0; in.Len() < 3<<20/2; i++ {
		fmt.Fprintf(&in, ", 'missing-%d'", i)
	}
	in.WriteString(")")
	out, code := ask(t, cfg, "sql", in.String())
	if code != exitOK || !strings.Contains(out, "n\n1\n(1 rows)") {
		t.Errorf("a %d-byte query: exit %d, output:\n%.500s", in.Len(), code, out)
	}
}
