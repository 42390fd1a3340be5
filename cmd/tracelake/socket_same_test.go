package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/query"
)

// bothWays runs each command of cmds (argv from its name on) through the
// socket of a run over a DuckDB file made by setup, then, the run stopped
// and the file closed, on the file directly, and returns both answers
// (standard output, the error line, the exit code) in order.
func bothWays(t *testing.T, setup []string, cmds ...[]string) (through, alone []string) {
	t.Helper()
	cfg := config.Default()
	cfg.Sink.Table = "events"
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "t.duckdb")
	snk, err := openDuckDB(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	if err := snk.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, q := range setup {
		if _, err := snk.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	reader, err := query.NewDuckDB(context.Background(), snk.DB(), query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveCommands(context.Background(), []loadTarget{{cfg, snk}}, reader, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range cmds {
		out, code := ask(t, cfg, c...)
		through = append(through, out+"\nexit "+strconv.Itoa(code))
	}
	stop()
	snk.Close()
	for _, c := range cmds {
		var out, stderr bytes.Buffer
		args := append([]string{c[0], "--duckdb", cfg.Sink.DuckDB.Path, "--table", cfg.Sink.Table}, c[1:]...)
		code, msg := exitStatus(runInside(context.Background(), &cmdEnv{stdout: &out, stderr: &stderr}, args))
		alone = append(alone, out.String()+msg+"\nexit "+strconv.Itoa(code))
	}
	return through, alone
}

// A query DuckDB itself fails (a column misspelt, an error raised while
// it runs) says what DuckDB said as it does on the stopped file:
// through run it was called refused ("query refused: Invalid Input
// Error: boom"), as if the read path's rules had kept the caller out.
func TestSQLEngineErrorsSameThroughRun(t *testing.T) {
	cmds := [][]string{
		{"sql", "SELECT nosuch FROM spans"},
		{"sql", "SELECT error('boom') FROM spans"},
		// A syntax error is DuckDB's parser's answer, with where it
		// stopped: through run it was called refused by the read
		// path's rules ("query refused: syntax error at or near …"),
		// without DuckDB's LINE 1 and its caret.
		{"sql", "SELECT 0x10 AS h FROM spans"},
		{"sql", "SELECT name FROM spans WHERE"},
	}
	through, alone := bothWays(t, []string{`CREATE TABLE spans AS SELECT 'a' AS tenant_id, 'n' AS name`}, cmds...)
	for i, c := range cmds {
		if through[i] != alone[i] {
			t.Errorf("%q through run:\n%s\non the stopped file:\n%s", c, through[i], alone[i])
		}
	}
}

// verify through run says why it checked without Kafka, as it does on
// the stopped file: the warning went to run's log, and the client saw
// the Kafka columns empty with no word why.
func TestVerifyWarningsReachTheClientThroughRun(t *testing.T) {
	cfg := config.Default()
	cfg.Sink.Table = "events"
	cfg.Kafka.Brokers = []string{"127.0.0.1:1"} // nothing listens there
	cfg.Kafka.Topics = []string{"t"}
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "t.duckdb")
	snk := openPrepared(t, cfg)
	reader, err := query.NewDuckDB(context.Background(), snk.DB(), query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var runLog bytes.Buffer
	stop := serveCommands(context.Background(), []loadTarget{{cfg, snk}}, reader, slog.New(slog.NewTextHandler(&runLog, nil)))
	defer stop()
	body, _ := json.Marshal(commandRequest{Args: []string{"verify"}, Database: cfg.Sink.DuckDB.Path})
	resp, err := socketClient(socketPath(cfg.Sink.DuckDB.Path)).Post("http://tracelake/v1/command", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	stderr, err := strconv.Unquote(resp.Trailer.Get(trailerStderr))
	if err != nil {
		t.Fatalf("stderr trailer %q: %v", resp.Trailer.Get(trailerStderr), err)
	}
	if !strings.Contains(stderr, "Kafka watermarks unavailable") {
		t.Errorf("verify through run without Kafka: its standard error says nothing of it: %q", stderr)
	}
}
