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
	if len(cfg.Params) > 0 {
		base["settings"] = cfg.Params
	}
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
// with the next query. A transaction lives in one session.
type session struct {
	c     *client
	state json.RawMessage
}

func (c *client) session() *session {
	return &session{c: c, state: append(json.RawMessage(nil), c.base...)}
}

// result is a finished query: column names and rows (nil for NULL).
type result struct {
	Columns []string
	Rows    [][]*string
}

// queryResponse is Databend's reply to /v1/query and to its pages. data
// holds strings, or null for NULL (databend-go's type has no NULL).
type queryResponse struct {
	ID       string                 `json:"id"`
	Session  json.RawMessage        `json:"session"`
	Schema   []godatabend.DataField `json:"schema"`
	Data     [][]*string            `json:"data"`
	State    string                 `json:"state"`
	Error    *godatabend.QueryError `json:"error"`
	NextURI  string                 `json:"next_uri"`
	FinalURI string                 `json:"final_uri"`
	Stats    *godatabend.QueryStats `json:"stats"`
}

// query runs sql in the session and reads every page of its result.
func (s *session) query(ctx context.Context, sql string) (*result, error) {
	req := godatabend.QueryRequest{SQL: sql, Session: &s.state}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp queryResponse
	if err := s.c.do(ctx, http.MethodPost, "/v1/query", "application/json", bytes.NewReader(body), nil, &resp); err != nil {
		return nil, err
	}
	res := &result{}
	for {
		if len(resp.Session) > 0 {
			s.state = resp.Session
		}
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
		if err := s.c.do(ctx, http.MethodGet, next, "", nil, nil, &resp); err != nil {
			return nil, err
		}
	}
	if resp.FinalURI != "" {
		// Frees the query on the server; the result is already complete.
		_ = s.c.do(ctx, http.MethodGet, resp.FinalURI, "", nil, nil, nil)
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
	h.Set("stage_name", stage)
	h.Set("relative_path", dir)
	return c.do(ctx, http.MethodPut, "/v1/upload_to_stage", w.FormDataContentType(), &buf, h, nil)
}

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
// and 5xx are retried; other 4xx mean tracelake sent something the server
// cannot take, which retrying cannot fix either.
func statusError(method, path string, code int, body []byte) error {
	if code >= 200 && code < 300 {
		return nil
	}
	msg := strings.TrimSpace(string(body))
	var qe struct {
		Error *godatabend.QueryError `json:"error"`
	}
	if json.Unmarshal(body, &qe) == nil && qe.Error != nil && qe.Error.Message != "" {
		msg = qe.Error.Message
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	err := fmt.Errorf("%s %s: HTTP %d: %s", method, path, code, msg)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %s (%w)", sink.ErrFatal, credentialsRefused, err)
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return &transientError{err}
	default:
		return fmt.Errorf("%w: %w", sink.ErrFatal, err)
	}
}

// sqlError classifies an error Databend reports for a statement. Most are
// permanent (a syntax error, a missing table, a permission) and stop the
// run with Databend's message; conflicts between concurrent commits and
// timeouts are retried.
func sqlError(e *godatabend.QueryError) error {
	err := fmt.Errorf("databend error %d: %s", e.Code, e.Message)
	msg := strings.ToLower(e.Message)
	for _, transient := range []string{"conflict", "retry", "timeout", "timed out", "unavailable", "version mismatch", "too many"} {
		if strings.Contains(msg, transient) {
			return &transientError{err}
		}
	}
	return fmt.Errorf("%w: %w", sink.ErrFatal, err)
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

// part is one file of a streaming load.
type part struct {
	name string
	data []byte
}

// streamingLoad sends files in one request to /v1/streaming_load, where
// sql (INSERT INTO … FROM @_databend_load …) reads them, in the session
// ss: its state goes in X-Databend-Query-Context, as for a query, so the
// insert joins the session's open transaction if Databend honours it
// there. It returns the rows Databend reports inserted.
func (s *session) streamingLoad(ctx context.Context, sql string, parts []part) (int64, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		fw, err := w.CreateFormFile("upload", p.name)
		if err != nil {
			return 0, err
		}
		if _, err := fw.Write(p.data); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	h := http.Header{}
	h.Set("X-Databend-SQL", sql)
	h.Set("X-Databend-Query-Context", string(s.state))
	var resp struct {
		ID      string                 `json:"id"`
		Session json.RawMessage        `json:"session"`
		Error   *godatabend.QueryError `json:"error"`
		Stats   struct {
			Rows int64 `json:"rows"`
		} `json:"stats"`
	}
	if err := s.c.do(ctx, http.MethodPut, "/v1/streaming_load", w.FormDataContentType(), &buf, h, &resp); err != nil {
		return 0, err
	}
	if len(resp.Session) > 0 {
		s.state = resp.Session
	}
	if resp.Error != nil {
		return 0, sqlError(resp.Error)
	}
	return resp.Stats.Rows, nil
}
