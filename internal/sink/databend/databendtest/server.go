// Package databendtest is an in-process HTTP server that behaves as
// databend-query's own source does (repository databendlabs/databend,
// read at commit 43b24ec0, 2026-08-22), so the Databend sink can be tested
// without a Databend: /v1/query with client-held sessions, long-polled
// pages that answer Running while a statement outlasts the wait time, a
// null session on replies whose session did not change, transactions held
// by the node that ran their last statement, a cluster of nodes behind a
// round-robin balancer routed by the sticky-node header, the real error
// codes, commit conflicts, COPY's load history checked at commit, PRESIGN
// UPLOAD with a PUT to the presigned URL and /v1/upload_to_stage. Each behaviour cites the source file it follows.
// It executes the statements the sink writes (matched by shape, not parsed
// as SQL) on in-memory tables, and fails on any other statement, so a
// change of the sink's SQL shows up in the tests. Faults are injected with
// the hooks.
package databendtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Row is one table row, column name → JSON value.
type Row map[string]json.RawMessage

// Server is a fake Databend. The zero value is not usable; call New.
type Server struct {
	*httptest.Server
	User, Password string
	// PageRows is how many rows one result page holds (paging is tested
	// with every query). Default 2.
	PageRows int
	// WaitTime is how long a request waits for its statement before the
	// reply says Running with a next_uri to poll (databend-query:
	// PaginationConf.wait_time_secs, DEFAULT_WAIT_TIME_SECS = 10 in
	// servers/http/v1/query/http_query.rs). Default 10 s; tests shorten it.
	WaitTime time.Duration

	// After is called once a statement ran, before its reply is sent,
	// without the lock: a test can act as another client in between (the
	// statement's client waits for its reply).
	After func(sql string)

	// Hooks, called with the lock held; nil means no fault.
	// QueryStatus returns an HTTP status to answer a statement with
	// instead of running it (0: run it).
	QueryStatus func(sql string) int
	// StatementTime is how long a statement runs before its result is
	// ready (0: at once). Longer than WaitTime, its replies say Running.
	StatementTime func(sql string) time.Duration
	// CommitError returns the error code a COMMIT fails with, rolling the
	// transaction back (0: commit). Databend's codes for lost races are
	// OCCRetryFailure 2011, TableVersionMismatched 2009 and
	// UnresolvableConflict 4001 (common/exception/src/exception_code.rs).
	CommitError func() int
	// LateCommit, asked at each COMMIT of a transaction, makes that
	// commit land late: the reply is lost (the connection closes) and the
	// transaction is applied only when the next COMMIT arrives, after the
	// client's retry read the ledger, as a commit still in flight in the
	// meta service when its reply was lost would.
	LateCommit func() bool
	// LandLate, asked before each statement while late commits are in
	// flight, lands them then (each checked as any commit is) rather
	// than at the next COMMIT: a commit in flight reaches the meta
	// service whenever it does, between any two statements of others.
	LandLate func(sql string) bool
	// Proxy puts a proxy with nginx's default underscores_in_headers off
	// in front of the server: request headers whose names hold an
	// underscore are dropped.
	Proxy bool
	// DropReply runs the statement and then closes the connection without
	// a reply, as a network failure after the server did the work would.
	DropReply func(sql string) bool
	// UploadStatus returns an HTTP status to answer an upload with instead
	// of storing it (0: store it).
	UploadStatus func(path string) int
	// Reject returns why a row COPY reads for table should be rejected ("":
	// load it), as Databend's JSON parser or a cast would.
	Reject func(table string, r Row) string
	// Accept lets statements the fake does not model succeed (merge SQL);
	// they are recorded and answer no rows.
	Accept func(sql string) bool
	// SQL runs the statements the fake does not model by pattern (the
	// merge models') in an embedded DuckDB over the session's view of the
	// tables, writing what they change into its transaction (execute).
	SQL bool
	// GlobalSettings are settings an administrator set with SET GLOBAL
	// (a setting of SettingScope::Both, settings/src/settings_default.rs);
	// a session's own settings override them. Modelled: max_result_rows,
	// a query (Statement::Query) without LIMIT gets LIMIT max_result_rows
	// (Planner::add_max_rows_limit, sql/src/planner/planner.rs; 0, the
	// default, means no limit); timezone (default UTC), in which a
	// TIMESTAMP is written in a result (formats field_encoder/string.rs
	// timestamp_text: jiff_timezone) and a string compared with one is
	// read (types/timestamp.rs string_to_timestamp with the function
	// context's tz) — by the plain column reads (selectColumns); the
	// query result cache (resultCache); format_null_as_str, a NULL
	// written as the string NULL (formatNulls); and
	// http_json_result_mode, a TIMESTAMP written as its microseconds in
	// driver mode by the plain column reads (driverMode); sql_dialect,
	// a double-quoted name refused under MySQL or Hive (dialectReads).
	GlobalSettings map[string]string

	mu      sync.Mutex
	nodes   []*node
	balance int // the balancer's next node
	tables  map[string]*table
	tasks   map[string]string // task name → its SQL (CREATE TASK, ALTER TASK … MODIFY AS)
	stage   map[string][]byte // path in the stage (stage name/path) → bytes
	// history is COPY's load history: table + "\x00" + path → when the
	// entry expires (zero: never). databend-query upserts a copied file's
	// key with the TTL load_file_metadata_expire_hours (default 24,
	// settings_default.rs; builder_copy_into_table.rs
	// build_upsert_copied_files_to_meta_req), and the meta service
	// forgets it then: a COPY no longer skips the file, a COMMIT's
	// condition on the key (seq 0) holds again.
	history map[string]time.Time
	skew    time.Duration           // Advance: the server's clock runs this far ahead
	cached  map[string]cachedResult // the query result cache, by statement
	late    []*txn                  // commits in flight (LateCommit)
	// pendingLate is the transaction of the COMMIT being run when
	// LateCommit said it lands late.
	pendingLate *txn
	nextID      int
	restarts    int   // RestartNodeAtNextRequest
	restartNext []int // RestartNodeAtNextRequest
	statements  []string
	uploads     []string
}

type table struct {
	cols    []string
	types   []string
	rows    []Row
	lenient bool // a user's table: NDJSON fields it lacks are dropped
	// autoinc is, by column, its AUTOINCREMENT clause as SHOW CREATE
	// TABLE writes it ("AUTOINCREMENT (0, 1) ORDER"), "" for none
	// (CreateTable: a type written with one).
	autoinc []string
	// rewrites counts the commits that rewrote rows (UPDATE, MERGE,
	// DELETE): the segments a transaction's own rewrite started from
	// are gone once it changed (see txn.base).
	rewrites int
}

// txn holds a transaction's writes until COMMIT.
type txn struct {
	rows    map[string][]Row
	history map[string]bool // files COPY loaded with FORCE = FALSE
	forced  map[string]bool // files COPY loaded with FORCE = TRUE
	// ttl is, per file in history or forced, how long the load history
	// keeps it once committed (the COPY's session's
	// load_file_metadata_expire_hours).
	ttl     map[string]time.Duration
	cleared map[string]bool // tables DELETE FROM emptied (their committed rows)
	// base is, per table the transaction rewrote (cleared), what its
	// rewrite read of the committed table: a COMMIT after another
	// transaction rewrote it too conflicts, one after appends only keeps
	// them (apply).
	base map[string]rewriteBase
}

type rewriteBase struct{ rewrites, rows int }

// rewrote records that tx rewrites table name from its committed rows as
// they are now.
func (tx *txn) rewrote(name string, t *table) {
	if tx.cleared == nil {
		tx.cleared = map[string]bool{}
	}
	if tx.base == nil {
		tx.base = map[string]rewriteBase{}
	}
	b, ok := tx.base[name]
	if !ok {
		b.rewrites = t.rewrites
	}
	b.rows = len(t.rows)
	tx.base[name], tx.cleared[name] = b, true
}

// New starts a fake Databend of one node on loopback with the given
// credentials.
func New(user, password string) *Server { return NewCluster(user, password, 1) }

// NewCluster starts a fake Databend cluster of n query nodes behind one
// address that hands each request to the next node in turn, as a load
// balancer in front of a warehouse does, unless the request names its
// node in X-DATABEND-STICKY-NODE. The nodes share tables and stage (object
// storage and the meta service), not queries or transactions.
func NewCluster(user, password string, n int) *Server {
	s := &Server{
		User: user, Password: password, PageRows: 2, WaitTime: 10 * time.Second,
		tables:  map[string]*table{},
		tasks:   map[string]string{},
		stage:   map[string][]byte{},
		history: map[string]time.Time{},
	}
	started := time.Now().UTC().Format(time.RFC3339)
	for i := range max(1, n) {
		s.nodes = append(s.nodes, &node{id: fmt.Sprintf("node-%d", i+1), started: started,
			queries: map[string]*query{}, txns: map[string]idleTxn{}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/query", s.routed(s.handleQuery))
	mux.HandleFunc("GET /v1/query/{id}/page/{n}", s.routed(s.handlePage))
	mux.HandleFunc("GET /v1/query/{id}/final", s.routed(s.handleFinal))
	mux.HandleFunc("PUT /presigned/{path...}", s.handlePresignedPut)
	mux.HandleFunc("PUT /v1/upload_to_stage", s.handleStageUpload)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Proxy {
			for name := range r.Header {
				if strings.Contains(name, "_") {
					delete(r.Header, name)
				}
			}
		}
		mux.ServeHTTP(w, r)
	}))
	return s
}

// Set runs f with the server's lock held: how a test changes the hooks,
// or reads the state they share, while the server answers.
func (s *Server) Set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// DSN is the DSN of the server for the sink.
func (s *Server) DSN(params string) string {
	dsn := fmt.Sprintf("databend://%s:%s@%s/default?sslmode=disable", s.User, s.Password, strings.TrimPrefix(s.URL, "http://"))
	if params != "" {
		dsn += "&" + params
	}
	return dsn
}

// Statements returns every statement received, in order.
func (s *Server) Statements() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.statements)
}

// Uploads returns the stage paths uploaded, in order (retries included).
func (s *Server) Uploads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uploads)
}

// StageFiles returns the paths in the stage now.
func (s *Server) StageFiles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for p := range s.stage {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Rows returns the committed rows of a table (name without quotes).
func (s *Server) Rows(name string) []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[name]
	if t == nil {
		return nil
	}
	return slices.Clone(t.rows)
}

// Columns returns a table's columns and their types as created ("name
// TYPE"), nil if there is no such table.
func (s *Server) Columns(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[name]
	if t == nil {
		return nil
	}
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = c + " " + t.types[i]
	}
	return out
}

// CreateTable makes a table as a user (or the reference tool) would have.
func (s *Server) CreateTable(name string, cols, types []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &table{cols: cols, types: slices.Clone(types), lenient: true, autoinc: make([]string, len(types))}
	for i, typ := range t.types {
		// A type may end with a column's AUTOINCREMENT clause: the
		// column keeps its type, DESC and system.columns show no sign
		// of it (interpreters util.rs generate_desc_schema), SHOW
		// CREATE TABLE writes it (interpreter_table_show_create.rs).
		if at := strings.Index(strings.ToUpper(typ), " AUTOINCREMENT"); at >= 0 {
			t.types[i], t.autoinc[i] = typ[:at], strings.TrimSpace(typ[at:])
		}
	}
	s.tables[name] = t
}

func (s *Server) authorized(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	return ok && u == s.User && p == s.Password
}

func (s *Server) handlePresignedPut(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Fake-Presigned") != "yes" {
		http.Error(w, "the presigned headers were not sent", http.StatusForbidden)
		return
	}
	if _, _, ok := r.BasicAuth(); ok {
		http.Error(w, "credentials sent to object storage", http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.store(w, r.PathValue("path"), body)
}

func (s *Server) handleStageUpload(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	f, hdr, err := r.FormFile("upload")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(f)
	// servers/http/v1/stage.rs UploadToStageArgs::read_arg: the
	// x-databend- header first, the underscore name for old clients.
	arg := func(name string) string {
		if v := r.Header.Get("X-Databend-" + name); v != "" {
			return v
		}
		return r.Header.Get(strings.ReplaceAll(name, "-", "_"))
	}
	if arg("stage-name") == "" {
		http.Error(w, "[HTTP-STAGE] Missing required parameter 'stage-name' in request headers", http.StatusBadRequest)
		return
	}
	path := arg("stage-name") + "/"
	if rel := strings.Trim(arg("relative-path"), "/"); rel != "" {
		path += rel + "/"
	}
	path += hdr.Filename
	s.store(w, path, body)
}

func (s *Server) store(w http.ResponseWriter, path string, body []byte) {
	s.mu.Lock()
	s.uploads = append(s.uploads, path)
	if s.UploadStatus != nil {
		if code := s.UploadStatus(path); code != 0 {
			s.mu.Unlock()
			http.Error(w, "injected", code)
			return
		}
	}
	s.stage[path] = body
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func hijackAndClose(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("databendtest: cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
}

// readStaged returns the NDJSON lines of a staged file, unpacking zstd.
func readStaged(data []byte) ([][]byte, error) {
	if bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		dec, err := zstd.NewReader(nil)
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		if data, err = dec.DecodeAll(data, nil); err != nil {
			return nil, fmt.Errorf("decompress: %w", err)
		}
	}
	var lines [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// MarkLoaded puts a staged file in a table's load history, as a COPY
// outside tracelake's ledger would have.
func (s *Server) MarkLoaded(table, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history[table+"\x00"+path] = time.Time{}
}

// Advance moves the server's clock on by d (the load history's entries
// expire by it), as time passing while a process is paused.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skew += d
}

// inHistory tells whether the load history has the key k (table + "\x00"
// + path) now. Called with the lock held.
func (s *Server) inHistory(k string) bool {
	exp, ok := s.history[k]
	return ok && (exp.IsZero() || time.Now().Add(s.skew).Before(exp))
}

// DropTable removes a table, as an operator might while tracelake runs.
func (s *Server) DropTable(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tables, name)
}

// TaskSQL is the SQL the task name runs, as CREATE TASK made it or ALTER
// TASK … MODIFY AS last set it; false if there is no such task.
func (s *Server) TaskSQL(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.tasks[name]
	return q, ok
}

// AppendRow adds a committed row to a table, as a write outside tracelake
// would (tests of verify).
func (s *Server) AppendRow(table string, r Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables[table].rows = append(s.tables[table].rows, r)
}

// RemoveRows deletes the committed rows of a table that drop says, as a
// write outside tracelake would (tests of verify).
func (s *Server) RemoveRows(table string, drop func(Row) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[table]
	t.rows = slices.DeleteFunc(slices.Clone(t.rows), drop)
	t.rewrites++ // a DELETE's commit
}
