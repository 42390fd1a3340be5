package icebergtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// REST is an Iceberg REST catalog server for tests. No REST catalog
// server (Polaris, Lakekeeper, Nessie, …) can run on this project's
// machines, so this one speaks the part of the REST catalog protocol
// (the Iceberg REST OpenAPI spec) that tracelake uses — config,
// namespaces, create, load and commit table — and keeps the tables in a
// real catalog (iceberg-go's SQL catalog), which applies each commit's
// requirements and updates. A failed requirement or a lost
// compare-and-swap answers 409 CommitFailedException, as the spec says.
type REST struct {
	URL string
	// Token is the bearer token every request must carry.
	Token string
	// Conflicts counts the commits answered 409.
	Conflicts atomic.Int64
	// SigV4Scope, when set ("region/service"), makes the server take
	// requests signed with AWS Signature Version 4 for that region and
	// service instead of the bearer token (AWS Glue's and S3 Tables'
	// endpoints authenticate that way). Only the Authorization header's
	// credential scope is checked, not the signature: there is no AWS here
	// to know the secret.
	SigV4Scope atomic.Value
	// LoseCommitReplies makes the next this many commits land and then
	// answer 503, as a gateway that lost the catalog's reply would: the
	// client cannot know whether its commit happened.
	LoseCommitReplies atomic.Int64
	// FailCommits makes the next this many commits answer 500 without
	// landing, as a catalog that failed before applying them would: the
	// client cannot tell them from a commit whose reply was lost.
	FailCommits atomic.Int64
	// GoneAfterLostReply makes the table load that follows each lost
	// reply answer 503 too: the catalog unreachable a moment, so the
	// client cannot read back whether its commit landed.
	GoneAfterLostReply atomic.Bool
	gone               atomic.Int64 // table loads still to fail
}

// StartREST serves backing over REST until the test ends.
func StartREST(t testing.TB, backing catalog.Catalog, token string) *REST {
	t.Helper()
	r := &REST{Token: token}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		auth := req.Header.Get("Authorization")
		if scope, _ := r.SigV4Scope.Load().(string); scope != "" {
			if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=") || !strings.Contains(auth, "/"+scope+"/aws4_request") ||
				req.Header.Get("X-Amz-Date") == "" {
				restError(w, http.StatusForbidden, "NotAuthorizedException", "want a SigV4 signature for "+scope)
				return
			}
		} else if auth != "Bearer "+token {
			restError(w, http.StatusUnauthorized, "NotAuthorizedException", "missing or wrong bearer token")
			return
		}
		r.serve(t, backing, w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *REST) serve(t testing.TB, cat catalog.Catalog, w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	parts := strings.Split(strings.Trim(strings.TrimPrefix(req.URL.Path, "/v1"), "/"), "/")
	switch {
	case req.Method == http.MethodGet && parts[0] == "config":
		reply(t, w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	case req.Method == http.MethodPost && len(parts) == 1 && parts[0] == "namespaces":
		var body struct {
			Namespace  []string             `json:"namespace"`
			Properties iceberggo.Properties `json:"properties"`
		}
		if !decode(w, req, &body) {
			return
		}
		err := cat.CreateNamespace(ctx, body.Namespace, body.Properties)
		if failed(w, err, catalog.ErrNamespaceAlreadyExists, http.StatusConflict, "AlreadyExistsException") {
			return
		}
		reply(t, w, body)
	case len(parts) == 3 && parts[0] == "namespaces" && parts[2] == "tables" && req.Method == http.MethodPost:
		var body struct {
			Name          string                   `json:"name"`
			Schema        *iceberggo.Schema        `json:"schema"`
			PartitionSpec *iceberggo.PartitionSpec `json:"partition-spec"`
			Properties    iceberggo.Properties     `json:"properties"`
		}
		if !decode(w, req, &body) {
			return
		}
		opts := []catalog.CreateTableOpt{catalog.WithProperties(body.Properties)}
		if body.PartitionSpec != nil {
			opts = append(opts, catalog.WithPartitionSpec(body.PartitionSpec))
		}
		tbl, err := cat.CreateTable(ctx, table.Identifier{parts[1], body.Name}, body.Schema, opts...)
		if failed(w, err, catalog.ErrTableAlreadyExists, http.StatusConflict, "AlreadyExistsException") {
			return
		}
		replyTable(t, w, tbl.Metadata(), tbl.MetadataLocation())
	case len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "tables":
		id := table.Identifier{parts[1], parts[3]}
		switch req.Method {
		case http.MethodGet, http.MethodHead:
			if r.gone.Add(-1) >= 0 {
				restError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "the catalog is unreachable")
				return
			}
			r.gone.Store(0)
			tbl, err := cat.LoadTable(ctx, id)
			if failed(w, err, catalog.ErrNoSuchTable, http.StatusNotFound, "NoSuchTableException") {
				return
			}
			replyTable(t, w, tbl.Metadata(), tbl.MetadataLocation())
		case http.MethodPost:
			var body struct {
				Requirements table.Requirements `json:"requirements"`
				Updates      table.Updates      `json:"updates"`
			}
			if !decode(w, req, &body) {
				return
			}
			if r.FailCommits.Add(-1) >= 0 {
				restError(w, http.StatusInternalServerError, "ServerError", "the catalog failed before the commit landed")
				return
			}
			meta, loc, err := cat.CommitTable(ctx, id, body.Requirements, body.Updates)
			if err != nil && iceberg.LostRace(err) {
				r.Conflicts.Add(1)
				err = fmt.Errorf("%w: %w", table.ErrCommitFailed, err)
			}
			if failed(w, err, table.ErrCommitFailed, http.StatusConflict, "CommitFailedException") {
				return
			}
			if r.LoseCommitReplies.Add(-1) >= 0 {
				if r.GoneAfterLostReply.Load() {
					r.gone.Store(1)
				}
				restError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", "the commit landed; its reply was lost")
				return
			}
			replyTable(t, w, meta, loc)
		default:
			restError(w, http.StatusMethodNotAllowed, "BadRequestException", req.Method)
		}
	default:
		restError(w, http.StatusNotFound, "NotFoundException", req.Method+" "+req.URL.Path+" is not served by this test server")
	}
}

// failed answers err, if any: with code and typ when it is (or wraps)
// known, else as a server error. It reports whether it answered.
func failed(w http.ResponseWriter, err, known error, code int, typ string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, known):
		restError(w, code, typ, err.Error())
	default:
		restError(w, http.StatusInternalServerError, "ServerError", err.Error())
	}
	return true
}

func decode(w http.ResponseWriter, req *http.Request, v any) bool {
	if err := json.NewDecoder(req.Body).Decode(v); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return false
	}
	return true
}

func replyTable(t testing.TB, w http.ResponseWriter, meta table.Metadata, loc string) {
	reply(t, w, map[string]any{"metadata-location": loc, "metadata": meta, "config": map[string]string{}})
}

func reply(t testing.TB, w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		t.Errorf("rest test server: encode reply: %v", err)
	}
}

func restError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
