package databend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	godatabend "github.com/datafuselabs/databend-go"

	"github.com/tracelake/tracelake/internal/sink"
)

// client speaks Databend's HTTP query API (POST /v1/query, then GET
// next_uri pages, then final_uri) and its stage uploads. The DSN and the
// wire types come from databend-go; the requests are made here because
// databend-go re-sends a query whose reply was lost, and a COPY re-sent
// inside a transaction could load its files twice. Here a lost reply is an
// error; the pipeline retries the whole load, whose transaction was
// rolled back, and the ledger decides what is already loaded.
type client struct {
	http     *http.Client
	endpoint string // scheme://host:port
	cfg      *godatabend.Config
	base     json.RawMessage // session every new session starts from
}

func newClient(dsn string, timeout time.Duration) (*client, error) {
	cfg, err := godatabend.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("sink.databend.dsn: %w", err)
	}
	scheme := "https"
	if cfg.SSLMode == godatabend.SSL_MODE_DISABLE {
		scheme = "http"
	}
	base := map[string]any{}
	if cfg.Database != "" {
		base["database"] = cfg.Database
	}
	if cfg.Role != "" {
		base["role"] = cfg.Role
	}
	// The DSN's settings, and the ones the sink's contracts depend on
	// (settings.go), whatever the server's SET GLOBAL says.
	if problems := settingProblems(cfg.Params); len(problems) > 0 {
		return nil, fmt.Errorf("sink.databend.dsn: %s", strings.Join(problems, "; "))
	}
	settings := sessionValues(cfg.Params)
	base["settings"] = settings
	raw, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	return &client{
		http:     &http.Client{Timeout: timeout},
		endpoint: scheme + "://" + cfg.Host,
		cfg:      cfg,
		base:     raw,
	}, nil
}

// session is one Databend session: the state the server hands back with
// every reply (database, settings, transaction) and the client returns
// with the next query. A transaction lives in one session, held by the
// node that ran its last statement.
type session struct {
	c     *client
	state json.RawMessage
	// node is the query node that answered the session's last statement
	// (the reply's node_id). While the server says the session needs it
	// (need_sticky: an open transaction), every request names it in
	// X-DATABEND-STICKY-NODE so that a balancer in front of a cluster
	// cannot hand the next statement to a node that does not hold the
	// transaction (servers/http/middleware/session.rs forwards a request
	// to the sticky node; any other node answers SessionLost).
	node string
}

func (c *client) session() *session {
	return &session{c: c, state: append(json.RawMessage(nil), c.base...)}
}

// update takes the session of a reply. A reply without one, or with a
// JSON null, leaves it as it was: since v1.2.758 a page reply carries
// null when the session did not change (HttpQuery::get_response_page in
// servers/http/v1/query/http_query.rs), and sending null back would start
// a fresh autocommit session outside the transaction.
func (s *session) update(state json.RawMessage) {
	if t := bytes.TrimSpace(state); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		s.state = append(s.state[:0:0], t...)
	}
}

// sticky reports whether the server asked for the session's requests to
// reach the node that holds it.
func (s *session) sticky() bool {
	var st struct {
		NeedSticky bool   `json:"need_sticky"`
		TxnState   string `json:"txn_state"`
	}
	_ = json.Unmarshal(s.state, &st)
	return st.NeedSticky || strings.EqualFold(st.TxnState, "Active")
}

// headers are the routing headers of a request of the session: the
// sticky node while the session needs one.
func (s *session) headers() http.Header {
	h := http.Header{}
	if s.node != "" && s.sticky() {
		h.Set(headerStickyNode, s.node)
	}
	return h
}

// Databend's routing headers (common/base/src/headers.rs).
const (
	headerStickyNode = "X-DATABEND-STICKY-NODE"
	headerNodeID     = "X-DATABEND-NODE-ID"
)

// result is a finished query: column names and rows (nil for NULL).
type result struct {
	Columns []string
	Rows    [][]*string
}

// queryResponse is Databend's reply to /v1/query and to its pages. data
// holds strings, or null for NULL (databend-go's type has no NULL).
type queryResponse struct {
	ID       string                 `json:"id"`
	NodeID   string                 `json:"node_id"`
	Session  json.RawMessage        `json:"session"`
	Schema   []godatabend.DataField `json:"schema"`
	Data     [][]*string            `json:"data"`
	State    string                 `json:"state"`
	Error    *godatabend.QueryError `json:"error"`
	NextURI  string                 `json:"next_uri"`
	FinalURI string                 `json:"final_uri"`
	Stats    *godatabend.QueryStats `json:"stats"`
}

// query runs sql in the session and reads every page of its result. A
// statement that outlasts the server's wait time answers Running with a
// next_uri to poll; polling goes on until the result is complete. Pages
// are fetched from the node that runs the query: a page GET names it in
// X-DATABEND-STICKY-NODE (a balancer may hand it to any node, which
// forwards it) and X-DATABEND-NODE-ID (a node that is not it answers 404
// rather than a wrong result).
func (s *session) query(ctx context.Context, sql string) (*result, error) {
	req := godatabend.QueryRequest{SQL: sql, Session: &s.state}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp queryResponse
	if err := s.c.do(ctx, http.MethodPost, "/v1/query", "application/json", bytes.NewReader(body), s.headers(), &resp); err != nil {
		return nil, err
	}
	node := resp.NodeID
	pages := http.Header{}
	if node != "" {
		pages.Set(headerStickyNode, node)
		pages.Set(headerNodeID, node)
		s.node = node
	}
	res := &result{}
	for {
		s.update(resp.Session)
		if resp.Error != nil {
			return nil, sqlError(resp.Error)
		}
		if len(resp.Schema) > 0 && res.Columns == nil {
			for _, f := range resp.Schema {
				res.Columns = append(res.Columns, f.Name)
			}
		}
		res.Rows = append(res.Rows, resp.Data...)
		if resp.NextURI == "" || strings.Contains(resp.NextURI, "/final") {
			break
		}
		next := resp.NextURI
		resp = queryResponse{}
		if err := s.c.do(ctx, http.MethodGet, next, "", nil, pages, &resp); err != nil {
			return nil, err
		}
	}
	if resp.FinalURI != "" {
		// Frees the query on the server; the result is already complete.
		_ = s.c.do(ctx, http.MethodGet, resp.FinalURI, "", nil, pages, nil)
	}
	return res, nil
}

// inTxn reports whether the server says the session has an open
// transaction.
func (s *session) inTxn() bool {
	var st struct {
		TxnState string `json:"txn_state"`
	}
	_ = json.Unmarshal(s.state, &st)
	return st.TxnState != "" && !strings.EqualFold(st.TxnState, "AutoCommit")
}

// do sends one HTTP request to the query node and decodes a JSON reply.
func (c *client) do(ctx context.Context, method, path, contentType string, body io.Reader, header http.Header, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint+path, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "tracelake")
	if c.cfg.Tenant != "" {
		req.Header.Set("X-DATABEND-TENANT", c.cfg.Tenant)
	}
	if c.cfg.Warehouse != "" {
		req.Header.Set("X-DATABEND-WAREHOUSE", c.cfg.Warehouse)
	}
	switch {
	case c.cfg.AccessToken != "":
		req.Header.Set("Authorization", "Bearer "+c.cfg.AccessToken)
	case c.cfg.User != "":
		req.SetBasicAuth(c.cfg.User, c.cfg.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &transientError{fmt.Errorf("%s %s: %w", method, path, redactURLError(err))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return &transientError{fmt.Errorf("%s %s: read reply: %w", method, path, err)}
	}
	if err := statusError(method, path, resp.StatusCode, data); err != nil {
		return err
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &transientError{fmt.Errorf("%s %s: reply is not Databend's JSON: %w", method, path, err)}
	}
	return nil
}

// put sends body to a presigned URL (object storage, not the query node:
// no Databend credentials go with it).
func (c *client) put(ctx context.Context, url string, header map[string]string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.ContentLength = int64(len(body))
	resp, err := c.http.Do(req)
	if err != nil {
		return &transientError{fmt.Errorf("upload to presigned URL: %w", redactURLError(err))}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return statusError(http.MethodPut, "presigned URL", resp.StatusCode, data)
}

// uploadToStage sends body through the query node's stage upload endpoint
// (for storage without presigned URLs).
func (c *client) uploadToStage(ctx context.Context, stage, dir, name string, body []byte) error {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	part, err := w.CreateFormFile("upload", name)
	if err != nil {
		return err
	}
	if _, err := part.Write(body); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	h := http.Header{}
	// servers/http/v1/stage.rs reads x-databend-stage-name first; proxies
	// drop header names with underscores (the old stage_name).
	h.Set("X-Databend-Stage-Name", stage)
	h.Set("X-Databend-Relative-Path", dir)
	return c.do(ctx, http.MethodPut, "/v1/upload_to_stage", w.FormDataContentType(), &buf, h, nil)
}

// stickyLost begins the 400 answer to a statement of a session whose node
// is no longer in the cluster (servers/http/middleware/session.rs,
// HTTPSessionEndpoint::call): a databend-query process that restarted
// (it draws a new node id at start, query/config/src/inner.rs
// InnerConfig::init) or left with a rolling upgrade or a scale-down. Its
// transaction is lost with it, as at SessionLost: a retry's new
// transaction reads the ledger first. Its code, BadArguments 1006, says
// nothing more, so the message's first words tell it apart: the one
// answer not told by its code alone.
const (
	stickyLost   = "Sticky session state lost"
	badArguments = 1006
)

const credentialsRefused = "Databend refused the credentials of sink.databend.dsn"

// transientError is a failure worth retrying: the network, a 5xx, a
// timeout. Anything else from Databend is wrapped in sink.ErrFatal.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func isTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t) || errors.Is(err, context.DeadlineExceeded)
}

// statusError classifies an HTTP status: 2xx is fine; 401 and 403 stop the
// run (credentials or grants are wrong, retrying cannot help); 408, 429
// and 5xx are retried, and so is the 400 of a session whose node left the
// cluster (stickyLost); other 4xx mean tracelake sent something the server
// cannot take, which retrying cannot fix either.
func statusError(method, path string, code int, body []byte) error {
	if code >= 200 && code < 300 {
		return nil
	}
	msg := strings.TrimSpace(string(body))
	var qe struct {
		Error *godatabend.QueryError `json:"error"`
	}
	code1006 := false
	if json.Unmarshal(body, &qe) == nil && qe.Error != nil && qe.Error.Message != "" {
		msg, code1006 = qe.Error.Message, qe.Error.Code == badArguments
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	err := fmt.Errorf("%s %s: HTTP %d: %s", method, path, code, msg)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %s (%w)", sink.ErrFatal, credentialsRefused, err)
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500,
		code == http.StatusBadRequest && code1006 && strings.HasPrefix(msg, stickyLost):
		return &transientError{err}
	default:
		return fmt.Errorf("%w: %w", sink.ErrFatal, err)
	}
}

// Databend's error codes that mean "try the load again"
// (common/exception/src/exception_code.rs). A retry always starts a new
// transaction that reads the ledger first, so each of these is safe to
// retry whatever part of the load it interrupted.
var retryableCodes = map[int]string{
	1036: "BadAddressFormat", 1037: "DnsParseError", 1038: "CannotConnectNode",
	1041: "TooManyUserConnections", 1042: "AbortedSession", 1043: "AbortedQuery",
	1053: "UnknownSession", 1122: "Timeout",
	2001: "MetaServiceError",
	// Commit races with another writer of the table.
	2009: "TableVersionMismatched", 2011: "OCCRetryFailure", 2317: "TxnRetryMaxTimes",
	// A COPY with FORCE = FALSE named a file that another transaction
	// loaded and committed meanwhile (the load history is checked again
	// at commit): that file is loaded, and the retry's ledger read says so.
	2014: "DuplicatedUpsertFiles",
	3901: "StorageUnavailable", 4000: "StorageOther",
	4001: "UnresolvableConflict",
	// The transaction is gone (failed earlier, timed out idle, or lost with
	// its node): nothing of it committed.
	4002: "CurrentTransactionIsAborted", 4003: "TransactionTimeout",
	5111: "SessionLost", 5112: "InvalidSessionState",
}

// sqlError classifies an error Databend reports for a statement by its
// code, never by the words of its message: the codes in retryableCodes
// are retried, every other one (a syntax error, a missing table, a
// permission) is permanent and stops the run with Databend's message.
func sqlError(e *godatabend.QueryError) error {
	if name, ok := retryableCodes[e.Code]; ok {
		return &transientError{&codeError{e.Code, fmt.Sprintf("databend error %d (%s): %s", e.Code, name, e.Message)}}
	}
	return fmt.Errorf("%w: %w", sink.ErrFatal, &codeError{e.Code, fmt.Sprintf("databend error %d: %s", e.Code, e.Message)})
}

// redactURLError drops the URL from a net/http error: a presigned URL is a
// credential.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
