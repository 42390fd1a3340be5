package main

// The local socket of `tracelake run`.
//
// On the DuckDB sink, `tracelake run` holds the database file for as long
// as it runs (DuckDB allows one process per file), so the commands that
// read it go through run instead: run listens on a unix socket beside the
// file, the database path + ".sock", created with mode 0600 (only the
// file's owner can connect), and a command whose open of the file fails
// because another process holds it asks there (whileRunHolds).
//
// The protocol is HTTP/1.1 over the socket:
//
//	GET /v1/ping
//	  → 200 {"pid": 4242, "database": "/abs/tracelake.duckdb", "version": "…"}
//	POST /v1/command  {"args": ["verify", "--json"], "database": "/abs/tracelake.duckdb"}
//	  args: the command's argv from its name on, as typed (--config and
//	  the other config flags are taken and ignored: the command uses run's
//	  config); database: the file the client's config names, which must be
//	  run's.
//	  → 200, then the body streams the command's standard output as it is
//	  written, and trailers end it:
//	    Tracelake-Exit: the exit code (0, 1 failed check or error, 2 usage)
//	    Tracelake-Error: what the command says after "tracelake: ", Go-quoted ("" for nothing)
//	    Tracelake-Stderr: the rest of its standard error (flag errors, what
//	      it logs: withCommandLog), Go-quoted
//	  A body that ends without Tracelake-Exit: run stopped before the
//	  command finished.
//
// The commands run inside run the same code as standalone (cmdEnv), on
// run's config and open sink: verify, report, dlq list and reconcile as
// they are, sql through the read path (internal/query: one SELECT,
// read-only, for --tenant's rows alone or for the operator). The commands
// that write the tables (merge, dlq replay) do not go through it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// socketPath is the socket beside the database file db.
func socketPath(db string) string { return db + ".sock" }

// commandRequest is the body of POST /v1/command.
// maxCommandBytes bounds a command asked on the socket (its arguments as
// JSON): far above any query a person types, as long as a generated one
// (an IN list of many thousand keys) gets, and only a guard against a
// runaway client, the socket being its owner's alone.
const maxCommandBytes = 64 << 20

var tooLongCommand = fmt.Sprintf("the command's arguments are over the %d MiB tracelake run takes on its socket: stop run to run it on the database itself", maxCommandBytes>>20)

type commandRequest struct {
	Args     []string `json:"args"`
	Database string   `json:"database"`
	// Table is the client's sink.table: of the tables run loads
	// (otlp.signals), the one the command is about; "" is run's own, and
	// another is refused for a command about it (runningFor).
	Table string `json:"table,omitempty"`
}

// runInfo is the answer of GET /v1/ping.
type runInfo struct {
	PID      int    `json:"pid"`
	Database string `json:"database"`
	Version  string `json:"version"`
}

// Trailers of a command's answer.
const (
	trailerExit   = "Tracelake-Exit"
	trailerError  = "Tracelake-Error"
	trailerStderr = "Tracelake-Stderr"
)

// commandServer answers the commands on run's socket.
type commandServer struct {
	path     string         // the socket
	database string         // run's database file, absolute
	running  []*runningSink // run's own first, then otlp.signals' other tables
	srv      *http.Server
	// base is the commands' context, canceled when run stops; inFlight
	// counts the commands running, which use the sink run closes after.
	base     context.Context
	cancel   context.CancelFunc
	inFlight sync.WaitGroup
}

// serveCommands starts run's socket for its DuckDB sink snk, whose
// tables are prepared. It returns the stop, to call before the sink
// closes: it cancels the commands in progress, waits for them and
// removes the socket. Without a socket (its path over the limit, a
// socket something else answers on, a failed listen) it logs why once
// and run goes on: the commands then say that nothing answers.
func serveCommands(ctx context.Context, targets []loadTarget, reader *query.DuckDB, log *slog.Logger) (stop func()) {
	cfg := targets[0].cfg
	path := socketPath(cfg.Sink.DuckDB.Path)
	database, err := filepath.Abs(cfg.Sink.DuckDB.Path)
	if err == nil {
		err = claimSocketPath(path)
	}
	var lis net.Listener
	if err == nil {
		lis, err = listenPrivate(path)
	}
	if err != nil {
		log.Warn("no local socket: commands such as verify and sql cannot read the database while this run holds it", "socket", path, "err", err)
		return func() {}
	}
	s := &commandServer{path: path, database: database}
	for _, t := range targets {
		s.running = append(s.running, &runningSink{cfg: t.cfg, snk: t.snk.(*duckdb.Sink), reader: reader})
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", s.ping)
	mux.HandleFunc("POST /v1/command", s.command)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("local socket stopped", "socket", path, "err", err)
		}
	}()
	log.Info("local socket: verify, sql, report, dlq list, reconcile and ready go through this run", "socket", path)
	return sync.OnceFunc(func() {
		s.cancel()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(sctx); err != nil {
			s.srv.Close()
		}
		s.inFlight.Wait() // a handler cut off by Close may still be running
		<-served
		// The listener removed the socket file when it closed (Go unlinks
		// the unix sockets it created).
	})
}

// claimSocketPath makes path free for run's socket: a socket file left
// by a run that was killed (nothing answers on it) is removed; anything
// else there is left as it is, and run goes without a socket.
func claimSocketPath(path string) error {
	if len(path) > maxSocketPath {
		return fmt.Errorf("the socket path is %d bytes, over the %d a unix socket takes: move the database to a shorter path", len(path), maxSocketPath)
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is there and is not a socket: left as it is", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("something answers on %s already: left as it is", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the stale socket: %w", err)
	}
	return nil
}

func (s *commandServer) ping(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(runInfo{PID: os.Getpid(), Database: s.database, Version: version})
}

// command runs one command and streams its standard output.
func (s *commandServer) command(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Add(1)
	defer s.inFlight.Done()
	var req commandRequest
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCommandBytes)).Decode(&req)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		http.Error(w, tooLongCommand, http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil || len(req.Args) == 0 {
		http.Error(w, `want {"args": [command, flags…], "database": path}`, http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()
	w.Header().Set("Trailer", strings.Join([]string{trailerExit, trailerError, trailerStderr}, ", "))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	out := &flushWriter{w: w, rc: http.NewResponseController(w)}
	_ = out.rc.Flush() // the client knows the command started
	var stderr bytes.Buffer
	err = s.sameDatabase(req.Database)
	var running *runningSink
	if err == nil {
		running, err = s.runningFor(req.Table, readsSinkTable(req.Args))
	}
	if err == nil {
		err = runInside(withCommandLog(ctx, &stderr), &cmdEnv{stdout: out, stderr: &stderr, running: running, beside: s.running}, req.Args)
	}
	code, msg := exitStatus(err)
	w.Header().Set(trailerExit, strconv.Itoa(code))
	w.Header().Set(trailerError, strconv.QuoteToASCII(msg))
	w.Header().Set(trailerStderr, strconv.QuoteToASCII(stderr.String()))
}

// readsSinkTable says whether the command args answers about the
// config's sink.table (its rows, ledger and dead letters): verify and dlq
// list. The others read what they name (sql, report, reconcile, ready).
func readsSinkTable(args []string) bool {
	name := commandName(args)
	return name == "verify" || name == "dlq list"
}

// runningFor is what run lends a command whose config names table: the
// sink of that table among run's (otlp.signals loads several), else run's
// own (kafka.signal's). For a command about the table (strict), a table
// run does not load is refused: run's config would answer for another
// table than the one asked about (verify would check run's table and say
// OK about it).
func (s *commandServer) runningFor(table string, strict bool) (*runningSink, error) {
	tables := make([]string, len(s.running))
	for i, r := range s.running {
		if strings.EqualFold(r.cfg.Sink.Table, table) { // DuckDB's names ignore case
			return r, nil
		}
		tables[i] = r.cfg.Sink.Table
	}
	if table == "" || !strict {
		return s.running[0], nil
	}
	return nil, usagef("the config names sink.table %q, and this tracelake run (pid %d) loads %s into %s: give the command the config run uses, or stop run to read %q",
		table, os.Getpid(), strings.Join(tables, ", "), s.database, table)
}

// sameDatabase refuses a client whose config names another database
// than run's: the command would read run's and answer for the wrong file.
func (s *commandServer) sameDatabase(path string) error {
	mine, err := os.Stat(s.database)
	if err != nil {
		return err
	}
	if theirs, err := os.Stat(path); err == nil && os.SameFile(mine, theirs) {
		return nil
	}
	return usagef("the config names the database %q, and this tracelake run (pid %d) loads %s: give the command the config run uses", path, os.Getpid(), s.database)
}

// runInside runs args (a command's argv from its name on) inside run, on
// env. The commands that write the tables are refused: the client says
// why before it asks (whileRunHolds).
func runInside(ctx context.Context, env *cmdEnv, args []string) error {
	switch name := commandName(args); name {
	case "verify":
		return cmdVerify(ctx, env, args[1:])
	case "sql":
		return cmdSQL(ctx, env, args[1:])
	case "report":
		return cmdReport(ctx, env, args[1:])
	case "reconcile":
		return cmdReconcile(ctx, env, args[1:])
	case "dlq list":
		return cmdDLQ(ctx, env, args[1:])
	case "ready":
		return cmdReady(ctx, env, args[1:])
	default:
		return usagef("%s does not go through tracelake run (verify, sql, report, dlq list, reconcile and ready do)", name)
	}
}

// commandName is the command args name: its first word, and a dlq's
// subcommand.
func commandName(args []string) string {
	if len(args) > 1 && args[0] == "dlq" {
		return "dlq " + args[1]
	}
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// flushWriter sends each write to the client at once.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// remoteExit is the end of a command run inside `tracelake run`: the exit
// code it gave and its message ("" for none).
type remoteExit struct {
	code int
	msg  string
}

func (e remoteExit) Error() string { return e.msg }

// whileRunHolds is what a command does when another process holds its
// DuckDB file (held): one that reads the file goes through the tracelake
// run there; one that writes it says exactly why it cannot.
func whileRunHolds(ctx context.Context, held heldError, args []string) error {
	name := commandName(args)
	switch name {
	case "verify", "sql", "reconcile", "dlq list", "ready":
		return throughRun(ctx, held, args, os.Stdout)
	}
	info, why := pingRun(ctx, held.path)
	if why != "" {
		return notThroughRun(held, name, why)
	}
	switch name {
	case "merge":
		return fmt.Errorf("merge writes the tables, and tracelake run (pid %d) holds %s: it merges them itself with merge.every (set it and restart run), or stop run to merge", info.PID, held.path)
	case "dlq replay":
		return fmt.Errorf("dlq replay writes the tables, and tracelake run (pid %d) holds %s: stop run, replay, then start run again", info.PID, held.path)
	}
	return fmt.Errorf("%s does not go through tracelake run, and tracelake run (pid %d) holds %s: stop run first", name, info.PID, held.path)
}

// throughRun runs args (a command's argv from its name on) inside the
// tracelake run that holds held.path, writing the command's standard
// output to stdout; its exit is the error returned (remoteExit), nil for
// 0.
func throughRun(ctx context.Context, held heldError, args []string, stdout io.Writer) error {
	sock := socketPath(held.path)
	if why := checkSocket(sock); why != "" {
		return notThroughRun(held, commandName(args), why)
	}
	database, err := filepath.Abs(held.path)
	if err != nil {
		return err
	}
	body, err := json.Marshal(commandRequest{Args: args, Database: database, Table: held.table})
	if err != nil {
		return err
	}
	if len(body) > maxCommandBytes {
		return usagef("%s", tooLongCommand)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://tracelake/v1/command", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := socketClient(sock).Do(req)
	if err != nil {
		return notThroughRun(held, commandName(args), fmt.Sprintf("nothing answers on %s (%v)", sock, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("tracelake run on %s: %s: %s", sock, resp.Status, strings.TrimSpace(string(text)))
	}
	if _, err := io.Copy(stdout, resp.Body); err != nil {
		return fmt.Errorf("tracelake run on %s stopped answering: %w", sock, err)
	}
	code, err := strconv.Atoi(resp.Trailer.Get(trailerExit))
	if err != nil {
		return fmt.Errorf("tracelake run on %s stopped before %s finished (no exit code)", sock, commandName(args))
	}
	if s, err := strconv.Unquote(resp.Trailer.Get(trailerStderr)); err == nil {
		fmt.Fprint(os.Stderr, s)
	}
	if code == exitOK {
		return nil
	}
	msg, _ := strconv.Unquote(resp.Trailer.Get(trailerError))
	return remoteExit{code: code, msg: msg}
}

// pingRun asks the run on the socket beside db who it is; why says why
// it could not ("" when it answered).
func pingRun(ctx context.Context, db string) (info runInfo, why string) {
	sock := socketPath(db)
	if why := checkSocket(sock); why != "" {
		return info, why
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://tracelake/v1/ping", nil)
	if err != nil {
		return info, err.Error()
	}
	resp, err := socketClient(sock).Do(req)
	if err != nil {
		return info, fmt.Sprintf("nothing answers on %s (%v)", sock, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != http.StatusOK {
		return info, fmt.Sprintf("what answers on %s is not a tracelake run (%s)", sock, resp.Status)
	}
	return info, ""
}

// checkSocket says why sock is no socket to ask, "" if it is one: it
// must be a socket of the user running the command (anyone who could
// replace it could answer in run's place otherwise).
func checkSocket(sock string) string {
	fi, err := os.Lstat(sock)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("there is no socket %s: a tracelake run older than this one has none, nor one whose socket path is over %d bytes (it logs why), and the process may not be tracelake run", sock, maxSocketPath)
	case err != nil:
		return err.Error()
	case fi.Mode().Type() != fs.ModeSocket:
		return sock + " is not a socket"
	case !ownedByMe(fi):
		return sock + " belongs to another user: only the database's owner reads through run"
	}
	return ""
}

// notThroughRun is the error of a command that found the file held and no
// run to go through: the open's error, and why.
func notThroughRun(held heldError, name, why string) error {
	return fmt.Errorf("%w\n  and %s does not go through it: %s; stop that process first", held.err, name, why)
}

// socketClient talks HTTP to the socket sock.
func socketClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}
