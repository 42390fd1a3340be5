package databendtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// node is one databend-query process: it holds the queries it runs and
// the transactions their sessions left open (HttpQueryManager in
// servers/http/v1/query/http_query_manager.rs).
type node struct {
	id, started string
	queries     map[string]*query
	// txns are open transactions by the id of the query that ran last in
	// them: add_txn when that query stopped, get_txn (which removes it)
	// when the next statement of the session starts.
	txns map[string]idleTxn
}

// idleTxn is an open transaction between two statements of its session,
// and when the node drops it: add_txn (servers/http/v1/query/
// http_query_manager.rs) spawns a task that sleeps the session's
// idle_transaction_timeout_secs (default 14400, scope Both,
// settings/src/settings_default.rs) and then removes it, so with 0 the
// transaction is gone before the session's next statement.
type idleTxn struct {
	tx    *txn
	until time.Time // on the server's clock (Advance)
}

// query is one statement and its result as the node keeps it for polling.
type query struct {
	id      string
	cols    []string
	rows    [][]*string
	err     *queryError
	session sessionConf
	tx      *txn // open after the statement: saved on the node when it stops
	ready   time.Time
	// sentSession: a reply already carried the session; later replies
	// carry null while it is unchanged (HttpQuery::get_response_page,
	// last_session_conf, in servers/http/v1/query/http_query.rs).
	sentSession bool
	stopped     bool
	pages       int // data pages handed out (page_manager.rs pages_returned)
}

// sessionConf is HttpSessionConf (servers/http/v1/query/http_query.rs):
// what the client carries from reply to request. internal is itself a
// JSON string (serialize_as_json_string).
type sessionConf struct {
	Catalog       *string           `json:"catalog,omitempty"`
	Database      *string           `json:"database,omitempty"`
	Role          *string           `json:"role,omitempty"`
	Settings      map[string]string `json:"settings,omitempty"`
	TxnState      string            `json:"txn_state,omitempty"` // AutoCommit | Active | Fail
	NeedSticky    bool              `json:"need_sticky"`
	NeedKeepAlive bool              `json:"need_keep_alive"`
	Internal      string            `json:"internal,omitempty"`
}

// sessionInternal is HttpSessionStateInternal.
type sessionInternal struct {
	LastNodeID   string   `json:"last_node_id,omitempty"`
	LastQueryIDs []string `json:"last_query_ids,omitempty"`
}

func (c sessionConf) internal() sessionInternal {
	var in sessionInternal
	_ = json.Unmarshal([]byte(c.Internal), &in)
	return in
}

func (c *sessionConf) setInternal(in sessionInternal) {
	b, _ := json.Marshal(in)
	c.Internal = string(b)
}

type queryRequest struct {
	SQL     string       `json:"sql"`
	Session *sessionConf `json:"session"`
}

type field struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type queryError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// response is QueryResponse (servers/http/v1/http_query_handlers.rs):
// session and next_uri are always present, null when absent.
type response struct {
	ID       string          `json:"id"`
	NodeID   string          `json:"node_id"`
	Session  *sessionConf    `json:"session"`
	Schema   []field         `json:"schema"`
	Data     [][]*string     `json:"data"`
	State    string          `json:"state"`
	Error    *queryError     `json:"error"`
	NextURI  *string         `json:"next_uri"`
	FinalURI *string         `json:"final_uri"`
	Stats    json.RawMessage `json:"stats"`
}

// Databend's error codes (common/exception/src/exception_code.rs).
const (
	CodeSyntaxException        = 1005
	CodeBadArguments           = 1006
	CodeUnknownTable           = 1025
	CodeSemanticError          = 1065 // a statement it cannot bind
	CodeAddColumnExist         = 1108 // ALTER TABLE … ADD COLUMN of a column the table has
	CodeTableVersionMismatched = 2009
	CodeOCCRetryFailure        = 2011
	CodeDuplicatedUpsertFiles  = 2014
	CodeStorageNotFound        = 3001
	CodeUnresolvableConflict   = 4001
	CodeTxnAborted             = 4002
	CodeTxnTimeout             = 4003
	CodeSessionLost            = 5111
)

// commitErrorMessage is the text Databend gives with a commit conflict
// code (the messages of the meta service's and fuse's errors).
func commitErrorMessage(code int) string {
	switch code {
	case CodeOCCRetryFailure:
		return "OCCRetryFailure: occ retry failure after 10 attempts"
	case CodeTableVersionMismatched:
		return "TableVersionMismatched: table version mismatched, expect 41 but got 42"
	case CodeUnresolvableConflict:
		return "UnresolvableConflict: transaction conflicts with a concurrent commit"
	default:
		return fmt.Sprintf("injected commit error %d", code)
	}
}

// routed picks the node of a request as the session middleware does
// (servers/http/middleware/session.rs HTTPSessionEndpoint::call): the
// node named by X-DATABEND-STICKY-NODE (the request is forwarded there),
// else whichever node the balancer hands it to.
func (s *Server) routed(h func(*node, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			http.Error(w, `{"error":{"code":401,"message":"authenticate failed"}}`, http.StatusUnauthorized)
			return
		}
		n, err := s.route(r)
		if err != nil {
			// HttpErrorCode::bad_request's body (servers/http/error.rs,
			// as_response): {"error": QueryError} of BadArguments 1006.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(struct {
				Error queryError `json:"error"`
			}{queryError{Code: 1006, Message: err.Error()}})
			return
		}
		h(n, w, r)
	}
}

func (s *Server) route(r *http.Request) (*node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restartPending()
	if id := r.Header.Get("X-DATABEND-STICKY-NODE"); id != "" {
		for _, n := range s.nodes {
			if n.id == id {
				return n, nil
			}
		}
		return nil, fmt.Errorf("Sticky session state lost: node '%s' not found in cluster", id)
	}
	n := s.nodes[s.balance%len(s.nodes)]
	s.balance++
	return n, nil
}

// checkNode is HttpQueryContext::check_node_id
// (servers/http/v1/query/http_query_context.rs): a poll that names a node
// other than the one it reached is a routing error (404).
func checkNode(n *node, r *http.Request, w http.ResponseWriter) bool {
	if want := r.Header.Get("X-DATABEND-NODE-ID"); want != "" && want != n.id {
		http.Error(w, fmt.Sprintf("Routing error: query %s should be on server %s, but current server is %s", r.PathValue("id"), want, n.id), http.StatusNotFound)
		return false
	}
	return true
}

func (s *Server) handleQuery(n *node, w http.ResponseWriter, r *http.Request) {
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
	sess := sessionConf{TxnState: "AutoCommit"}
	if req.Session != nil {
		sess = *req.Session
	}
	tx, err := s.continueTxn(n, sess)
	if err != nil {
		// HttpQueryRequest::fail_to_start_sql: no query is made; the reply
		// hands the session back with an active transaction marked failed.
		if sess.TxnState == "Active" {
			sess.TxnState = "Fail"
		}
		sess.NeedSticky, sess.NeedKeepAlive = false, false
		s.mu.Unlock()
		writeJSON(w, response{State: "Failed", Session: &sess, Error: err, Data: [][]*string{}})
		return
	}
	if len(s.late) > 0 && s.LandLate != nil && s.LandLate(req.SQL) {
		for _, l := range s.late {
			_ = s.commit(l)
		}
		s.late = nil
	}
	s.nextID++
	q := &query{id: "q" + strconv.Itoa(s.nextID)}
	var runErr error
	q.cols, q.rows, runErr = s.run(req.SQL, &sess, &tx)
	q.rows = s.maxResultRows(req.SQL, sess, q.rows)
	if runErr == nil {
		q.cols, q.rows = s.resultCache(req.SQL, sess, q.cols, q.rows)
	}
	q.rows = s.formatNulls(sess, q.rows)
	if runErr != nil {
		q.err = asQueryError(runErr)
		if sess.TxnState == "Active" {
			// A failed statement fails its transaction: later statements
			// answer 4002 and COMMIT ends it without writing
			// (tests/sqllogictests/suites/stage/copy_into_txn.test).
			sess.TxnState, tx = "Fail", nil
		}
	}
	// HttpQuery::get_response_session: the session names this node and
	// this query; an open transaction makes it sticky.
	sess.setInternal(sessionInternal{LastNodeID: n.id, LastQueryIDs: []string{q.id}})
	sess.NeedSticky = sess.TxnState == "Active"
	sess.NeedKeepAlive = sess.NeedSticky
	q.session, q.tx = sess, tx
	if s.StatementTime != nil {
		q.ready = time.Now().Add(s.StatementTime(req.SQL))
	}
	n.queries[q.id] = q
	drop := s.DropReply != nil && s.DropReply(req.SQL)
	if strings.TrimSpace(req.SQL) == "COMMIT" && q.err == nil && s.pendingLate != nil {
		s.late = append(s.late, s.pendingLate)
		drop = true
	}
	s.pendingLate = nil
	s.mu.Unlock()
	if s.After != nil {
		s.After(req.SQL)
	}
	if drop {
		s.waitReady(q)
		s.mu.Lock()
		s.stop(n, q)
		s.mu.Unlock()
		hijackAndClose(w)
		return
	}
	s.reply(n, q, 0, w)
}

// continueTxn finds the transaction a session continues on this node
// (try_set_txn in servers/http/v1/query/http_query.rs): an active one
// must be on the node that ran the session's last statement, else
// SessionLost; the node hands it over once (get_txn removes it), else
// TransactionTimeout. A failed one admits only COMMIT and ROLLBACK.
func (s *Server) continueTxn(n *node, sess sessionConf) (*txn, *queryError) {
	if sess.TxnState != "Active" {
		return nil, nil
	}
	in := sess.internal()
	if in.LastNodeID != n.id {
		return nil, &queryError{Code: CodeSessionLost, Message: fmt.Sprintf(
			"Transaction aborted because server restart or route error: expecting server %s, current one is %s started at %s ", in.LastNodeID, n.id, n.started)}
	}
	if len(in.LastQueryIDs) == 0 {
		return nil, &queryError{Code: 5112, Message: "Invalid transaction state: transaction is active but last_query_ids is empty"}
	}
	idle, ok := n.txns[in.LastQueryIDs[0]]
	delete(n.txns, in.LastQueryIDs[0])
	if !ok || !time.Now().Add(s.skew).Before(idle.until) {
		return nil, &queryError{Code: CodeTxnTimeout, Message: fmt.Sprintf("Transaction timeout: last_query_id %s not found on this server", in.LastQueryIDs[0])}
	}
	return idle.tx, nil
}

// waitReady sleeps until q's result is ready or the wait time is over.
func (s *Server) waitReady(q *query) {
	s.mu.Lock()
	wait := time.Until(q.ready)
	if s.WaitTime > 0 {
		wait = min(wait, s.WaitTime)
	}
	s.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
}

// stop marks q stopped and saves its open transaction on the node for
// the session's next statement (add_txn, when the query is stopped).
func (s *Server) stop(n *node, q *query) {
	if q.stopped {
		return
	}
	q.stopped = true
	if q.tx != nil {
		n.txns[q.id] = idleTxn{q.tx, time.Now().Add(s.skew).Add(s.idleTxnTimeout(q.session))}
	}
}

// idleTxnTimeout is how long the node keeps a session's transaction
// between two statements (see idleTxn).
func (s *Server) idleTxnTimeout(sess sessionConf) time.Duration {
	secs, err := strconv.ParseUint(s.setting(sess, "idle_transaction_timeout_secs"), 10, 32)
	if err != nil {
		secs = 14400
	}
	return time.Duration(secs) * time.Second
}

// reply long-polls page pageNo of q: it waits up to the wait time for
// the result, then answers Running (no data, next_uri the same page) or
// the page, with next_uri the next page or final_uri
// (QueryResponse::from_internal in servers/http/v1/http_query_handlers.rs).
func (s *Server) reply(n *node, q *query, pageNo int, w http.ResponseWriter) {
	s.waitReady(q)
	s.mu.Lock()
	resp := response{ID: q.id, NodeID: n.id, State: "Running", Data: [][]*string{}, Stats: json.RawMessage(`{"running_time_ms":1}`)}
	final := "/v1/query/" + q.id + "/final"
	resp.FinalURI = &final
	if !q.sentSession {
		sess := q.session
		resp.Session = &sess
		q.sentSession = true
	}
	ready := !time.Now().Before(q.ready)
	switch {
	case !ready:
		next := fmt.Sprintf("/v1/query/%s/page/%d", q.id, q.pages)
		resp.NextURI = &next
	case q.err != nil:
		s.stop(n, q)
		resp.State, resp.Error, resp.NextURI = "Failed", q.err, &final
	default:
		s.stop(n, q)
		resp.State = "Succeeded"
		for _, c := range q.cols {
			resp.Schema = append(resp.Schema, field{Name: c, Type: "String"})
		}
		per := max(1, s.PageRows)
		from := min(pageNo*per, len(q.rows))
		to := min(from+per, len(q.rows))
		resp.Data = append(resp.Data, q.rows[from:to]...)
		if pageNo == q.pages && to > from {
			q.pages++
		}
		resp.NextURI = &final
		if to < len(q.rows) {
			next := fmt.Sprintf("/v1/query/%s/page/%d", q.id, pageNo+1)
			resp.NextURI = &next
		}
	}
	s.mu.Unlock()
	writeJSON(w, resp)
}

func (s *Server) handlePage(n *node, w http.ResponseWriter, r *http.Request) {
	if !checkNode(n, r, w) {
		return
	}
	s.mu.Lock()
	q := n.queries[r.PathValue("id")]
	pageNo, _ := strconv.Atoi(r.PathValue("n"))
	if q == nil {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("Query ID %s not found on node %s", r.PathValue("id"), n.id), http.StatusNotFound)
		return
	}
	// page_manager.rs get_a_page: the next page, or the last one again.
	if pageNo != q.pages && pageNo+1 != q.pages {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("Invalid page number: requested %d, current page is %d", pageNo, q.pages), http.StatusNotFound)
		return
	}
	s.mu.Unlock()
	s.reply(n, q, pageNo, w)
}

// handleFinal closes the query; the reply carries no session (it "SHOULD
// response with nothing but next_uri = null": query_final_handler).
func (s *Server) handleFinal(n *node, w http.ResponseWriter, r *http.Request) {
	if !checkNode(n, r, w) {
		return
	}
	s.mu.Lock()
	q := n.queries[r.PathValue("id")]
	if q == nil {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("Query ID %s not found on node %s", r.PathValue("id"), n.id), http.StatusNotFound)
		return
	}
	if !time.Now().Before(q.ready) {
		s.stop(n, q)
	}
	delete(n.queries, q.id)
	state := "Succeeded"
	if q.err != nil {
		state = "Failed"
	}
	s.mu.Unlock()
	writeJSON(w, response{ID: q.id, NodeID: n.id, State: state, Data: [][]*string{}, Error: q.err})
}

// asQueryError gives an error of run its Databend code: a *codedError
// keeps its own, anything else is BadArguments.
func asQueryError(err error) *queryError {
	if ce, ok := err.(*codedError); ok {
		return &queryError{Code: ce.code, Message: ce.msg}
	}
	return &queryError{Code: CodeBadArguments, Message: err.Error()}
}

// codedError is a statement failure with Databend's code.
type codedError struct {
	code int
	msg  string
}

// unknownTable is Databend's error for a table that does not exist.
func unknownTable(name string) error {
	return &codedError{CodeUnknownTable, fmt.Sprintf("Unknown table '%s'", name)}
}

func (e *codedError) Error() string { return fmt.Sprintf("%d: %s", e.code, e.msg) }

// maxResultRows applies the max_result_rows setting (the session's, else
// the global one) to a query without LIMIT, as Planner::add_max_rows_limit
// (sql/src/planner/planner.rs) does: the result is cut silently.
func (s *Server) maxResultRows(sql string, sess sessionConf, rows [][]*string) [][]*string {
	limit, _ := strconv.Atoi(s.setting(sess, "max_result_rows"))
	up := strings.ToUpper(strings.TrimSpace(sql))
	if limit <= 0 || !strings.HasPrefix(up, "SELECT") || strings.Contains(up, " LIMIT ") || len(rows) <= limit {
		return rows
	}
	return rows[:limit]
}

// formatNulls writes each NULL of a result as the string NULL where the
// format_null_as_str setting (the session's, else the global one) is 1,
// as databend-query's reply does: RowSerializer (servers/http/v1/query/
// blocks_serializer.rs) writes a JSON null only when the setting is off,
// and the field encoder's text of NULL otherwise. Its default
// (settings/src/settings_default.rs, scope Both) was 1 from v1.2.6xx
// (databendlabs/databend#16120) until databendlabs/databend#18026 made
// it 0; the fake's is 0.
func (s *Server) formatNulls(sess sessionConf, rows [][]*string) [][]*string {
	if s.setting(sess, "format_null_as_str") != "1" {
		return rows
	}
	out := make([][]*string, len(rows))
	for i, row := range rows {
		out[i] = slices.Clone(row)
		for j, v := range out[i] {
			if v == nil {
				out[i][j] = str("NULL")
			}
		}
	}
	return out
}

// cachedResult is a query's result kept by the query result cache.
type cachedResult struct {
	cols    []string
	rows    [][]*string
	expires time.Time
}

// resultCache answers a query from the query result cache where
// databend-query would (interpreter_select.rs: enable_query_result_cache
// on, default off): a result kept for the same statement within
// query_result_cache_ttl_secs (default 300) is returned instead of the
// tables' rows — whatever was written since, when
// query_result_cache_allow_inconsistent is on (ResultCacheReader::
// try_read_cached_result_with_meta_key, storages/basic/src/result_cache/
// read/reader.rs: with it off, a result whose tables changed is not
// used, so only the inconsistent mode is modelled). A result is kept only
// if its first block took query_result_cache_min_execute_secs (default 1)
// to come: the fake's queries take no time, so only with 0. System
// tables are never cached (physical_table_scan.rs: only Fuse tables).
// Called with the lock held.
func (s *Server) resultCache(sql string, sess sessionConf, cols []string, rows [][]*string) ([]string, [][]*string) {
	up := strings.ToUpper(strings.TrimSpace(sql))
	if s.setting(sess, "enable_query_result_cache") != "1" || s.setting(sess, "query_result_cache_allow_inconsistent") != "1" ||
		!strings.HasPrefix(up, "SELECT") || strings.Contains(up, "SYSTEM.") {
		return cols, rows
	}
	now := time.Now().Add(s.skew)
	if c, ok := s.cached[sql]; ok && now.Before(c.expires) {
		return c.cols, c.rows
	}
	if s.setting(sess, "query_result_cache_min_execute_secs") != "0" {
		return cols, rows
	}
	ttl := 300 * time.Second
	if v, err := strconv.Atoi(s.setting(sess, "query_result_cache_ttl_secs")); err == nil {
		ttl = time.Duration(v) * time.Second
	}
	if s.cached == nil {
		s.cached = map[string]cachedResult{}
	}
	s.cached[sql] = cachedResult{cols: cols, rows: rows, expires: now.Add(ttl)}
	return cols, rows
}

// setting is the value of a setting in the session: its own, else the
// global one ("" when neither is set: the default).
func (s *Server) setting(sess sessionConf, name string) string {
	if v, ok := sess.Settings[name]; ok {
		return v
	}
	return s.GlobalSettings[name]
}

// driverMode says whether the session's http_json_result_mode (the
// session's, else SET GLOBAL's; default display, scope Both:
// settings/src/settings_default.rs, added by databendlabs/databend#19639)
// is driver, in which a reply writes a TIMESTAMP as its microseconds
// since the epoch rather than as text (formats field_encoder/string.rs
// timestamp_text). Any other value than display or driver is refused
// (its SettingRange::String).
func (s *Server) driverMode(sess sessionConf) (bool, error) {
	switch v := s.setting(sess, "http_json_result_mode"); v {
	case "", "display":
		return false, nil
	case "driver":
		return true, nil
	default:
		return false, &codedError{CodeSemanticError, fmt.Sprintf("invalid http_json_result_mode %q: want display or driver", v)}
	}
}

// timezone is the session's timezone setting (default UTC,
// settings/src/settings_default.rs "timezone", scope Both: SET GLOBAL
// changes it for every session that does not set its own).
func (s *Server) timezone(sess sessionConf) (*time.Location, error) {
	name := s.setting(sess, "timezone")
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &codedError{CodeSemanticError, fmt.Sprintf("invalid timezone %q: %v", name, err)}
	}
	return loc, nil
}
