// Package databendtest is an in-process HTTP server that follows
// Databend's documented HTTP API closely enough to test the Databend sink
// without a Databend: /v1/query with client-held sessions, paged results
// (next_uri, final_uri) and errors; PRESIGN UPLOAD with a PUT to the
// presigned URL; /v1/upload_to_stage; transactions (BEGIN, COMMIT,
// ROLLBACK) with COPY's load history committed with the data. It executes
// the statements the sink writes (matched by shape, not parsed as SQL) on
// in-memory tables, and fails on any other statement, so a change of the
// sink's SQL shows up in the tests. Faults are injected with the hooks.
package databendtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"

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

	// Hooks, called with the lock held; nil means no fault.
	// QueryStatus returns an HTTP status to answer a statement with
	// instead of running it (0: run it).
	QueryStatus func(sql string) int
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

	mu         sync.Mutex
	tables     map[string]*table
	stage      map[string][]byte // path in the stage (stage name/path) → bytes
	history    map[string]bool   // table + "\x00" + path: COPY's load history
	txns       map[string]*txn
	nextID     int
	statements []string
	uploads    []string
	pages      map[string][][]*string
}

type table struct {
	cols    []string
	types   []string
	rows    []Row
	lenient bool // a user's table: NDJSON fields it lacks are dropped
}

// txn holds a transaction's writes until COMMIT.
type txn struct {
	rows    map[string][]Row
	history map[string]bool
}

// New starts a fake Databend on loopback with the given credentials.
func New(user, password string) *Server {
	s := &Server{
		User: user, Password: password, PageRows: 2,
		tables:  map[string]*table{},
		stage:   map[string][]byte{},
		history: map[string]bool{},
		txns:    map[string]*txn{},
		pages:   map[string][][]*string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/query", s.handleQuery)
	mux.HandleFunc("GET /v1/query/{id}/page/{n}", s.handlePage)
	mux.HandleFunc("GET /v1/query/{id}/final", s.handleFinal)
	mux.HandleFunc("PUT /presigned/{path...}", s.handlePresignedPut)
	mux.HandleFunc("PUT /v1/upload_to_stage", s.handleStageUpload)
	mux.HandleFunc("PUT /v1/streaming_load", s.handleStreamingLoad)
	s.Server = httptest.NewServer(mux)
	return s
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

// CreateTable makes a table as a user (or the reference tool) would have.
func (s *Server) CreateTable(name string, cols, types []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables[name] = &table{cols: cols, types: types, lenient: true}
}

func (s *Server) authorized(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	return ok && u == s.User && p == s.Password
}

type queryRequest struct {
	SQL     string          `json:"sql"`
	Session json.RawMessage `json:"session"`
}

type field struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type queryError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type response struct {
	ID       string          `json:"id"`
	Session  json.RawMessage `json:"session,omitempty"`
	Schema   []field         `json:"schema"`
	Data     [][]*string     `json:"data"`
	State    string          `json:"state"`
	Error    *queryError     `json:"error"`
	NextURI  string          `json:"next_uri,omitempty"`
	FinalURI string          `json:"final_uri,omitempty"`
}

func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, `{"error":{"code":401,"message":"authenticate failed"}}`, http.StatusUnauthorized)
		return
	}
	var req queryRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.statements = append(s.statements, req.SQL)
	if s.QueryStatus != nil {
		if code := s.QueryStatus(req.SQL); code != 0 {
			s.mu.Unlock()
			http.Error(w, `{"error":{"code":`+strconv.Itoa(code)+`,"message":"injected"}}`, code)
			return
		}
	}
	sess := map[string]any{}
	_ = json.Unmarshal(req.Session, &sess)
	cols, rows, err := s.run(req.SQL, sess)
	drop := s.DropReply != nil && s.DropReply(req.SQL)
	s.nextID++
	id := "q" + strconv.Itoa(s.nextID)
	resp := response{ID: id, State: "Succeeded"}
	resp.Session, _ = json.Marshal(sess)
	if err != nil {
		resp.State = "Failed"
		resp.Error = &queryError{Code: 1006, Message: err.Error()}
	} else {
		for _, c := range cols {
			resp.Schema = append(resp.Schema, field{Name: c, Type: "String"})
		}
		resp.Data, resp.NextURI = s.firstPage(id, rows)
		resp.FinalURI = "/v1/query/" + id + "/final"
	}
	s.mu.Unlock()
	if drop {
		hijackAndClose(w)
		return
	}
	writeJSON(w, resp)
}

// firstPage returns the first page of rows and the next_uri, keeping the
// rest for handlePage.
func (s *Server) firstPage(id string, rows [][]*string) ([][]*string, string) {
	n := max(1, s.PageRows)
	if len(rows) <= n {
		return rows, ""
	}
	s.pages[id] = rows[n:]
	return rows[:n], "/v1/query/" + id + "/page/1"
}

func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	id := r.PathValue("id")
	rest, ok := s.pages[id]
	if !ok {
		s.mu.Unlock()
		http.Error(w, `{"error":{"code":404,"message":"query not found"}}`, http.StatusNotFound)
		return
	}
	n := max(1, s.PageRows)
	resp := response{ID: id, State: "Succeeded", FinalURI: "/v1/query/" + id + "/final"}
	if len(rest) <= n {
		resp.Data = rest
		delete(s.pages, id)
	} else {
		resp.Data = rest[:n]
		s.pages[id] = rest[n:]
		next, _ := strconv.Atoi(r.PathValue("n"))
		resp.NextURI = fmt.Sprintf("/v1/query/%s/page/%d", id, next+1)
	}
	s.mu.Unlock()
	writeJSON(w, resp)
}

func (s *Server) handleFinal(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	delete(s.pages, r.PathValue("id"))
	s.mu.Unlock()
	writeJSON(w, response{ID: r.PathValue("id"), State: "Succeeded"})
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
	path := r.Header.Get("stage_name") + "/" + r.Header.Get("relative_path") + hdr.Filename
	s.store(w, path, body)
}

// handleStreamingLoad runs X-Databend-SQL (INSERT INTO t FROM
// @_databend_load …) over the uploaded files, in the session of
// X-Databend-Query-Context: inside its transaction if it has one. A row
// the table cannot take fails the whole request, as streaming load has no
// per-row report. It is recorded in Statements as "STREAMING LOAD <sql>".
func (s *Server) handleStreamingLoad(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, `{"error":{"code":401,"message":"authenticate failed"}}`, http.StatusUnauthorized)
		return
	}
	sql := r.Header.Get("X-Databend-SQL")
	m := reStreamingLoad.FindStringSubmatch(sql)
	if m == nil {
		http.Error(w, `{"error":{"code":1005,"message":"fake: streaming load SQL not modelled"}}`, http.StatusBadRequest)
		return
	}
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sess := map[string]any{}
	_ = json.Unmarshal([]byte(r.Header.Get("X-Databend-Query-Context")), &sess)
	s.mu.Lock()
	s.statements = append(s.statements, "STREAMING LOAD "+sql)
	name := unquote(m[1])
	t := s.tables[name]
	var rows []Row
	var fail string
	if t == nil {
		fail = fmt.Sprintf("Unknown table '%s'", name)
	}
	for _, fh := range r.MultipartForm.File["upload"] {
		if fail != "" {
			break
		}
		f, _ := fh.Open()
		data, _ := io.ReadAll(f)
		f.Close()
		parsed, err := parseRows(t, data)
		if err != nil {
			fail = err.Error()
			break
		}
		for _, row := range parsed {
			if reason := s.rowError(name, t, row); reason != "" {
				fail = reason
				break
			}
		}
		rows = append(rows, parsed...)
	}
	if fail != "" {
		s.mu.Unlock()
		http.Error(w, `{"error":{"code":1046,"message":`+string(jsonOf(fail))+`}}`, http.StatusBadRequest)
		return
	}
	s.write(s.txns[fmt.Sprint(sess["fake_txn"])], name, rows)
	drop := s.DropReply != nil && s.DropReply("STREAMING LOAD "+sql)
	s.mu.Unlock()
	if drop {
		hijackAndClose(w)
		return
	}
	writeJSON(w, map[string]any{"id": "load", "stats": map[string]int{"rows": len(rows)}})
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
	s.history[table+"\x00"+path] = true
}

// DropTable removes a table, as an operator might while tracelake runs.
func (s *Server) DropTable(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tables, name)
}

// AppendRow adds a committed row to a table, as a write outside tracelake
// would (tests of verify).
func (s *Server) AppendRow(table string, r Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables[table].rows = append(s.tables[table].rows, r)
}
