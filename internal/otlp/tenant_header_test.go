package otlp

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// postHeaders posts a traces request with the header values given as
// they are, several values of one name included, and returns the status.
func postHeaders(t *testing.T, r *Receivers, body []byte, header http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+r.Addr["http"]+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", contentProto)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A request naming several tenants (X-Scope-OrgID twice, or the
// x-scope-orgid metadata key with two values) is refused on both
// receivers, never written as the first one: which of two tenants a
// request meant is not for the server to guess (a proxy that appends its
// own header after the client's would otherwise be overridden by the
// client), and dskit's gRPC middleware, which Loki, Tempo and Mimir use,
// refuses several values too.
func TestReceiversRefuseSeveralTenants(t *testing.T) {
	pb, _ := traceRequest(t, 1)
	fwd := &forwarded{}
	r := start(t, fwd, nil)

	for name, values := range map[string][]string{"two headers": {"team-a", "team-b"}, "the same twice": {"team-a", "team-a"}} {
		if got := postHeaders(t, r, pb, http.Header{"X-Scope-Orgid": values}); got != http.StatusBadRequest {
			t.Errorf("HTTP, %s: status %d, want 400", name, got)
		}
	}
	client := ptraceotlp.NewGRPCClient(grpcConn(t, r))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", "team-a", "x-scope-orgid", "team-b")
	if _, err := client.Export(ctx, exportRequest(t, pb)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC with two x-scope-orgid values: %v, want InvalidArgument", err)
	}
	if got := fwd.stored(); len(got) != 0 {
		t.Errorf("forwarded %d requests, as tenants %q…; want none", len(got), got[0].tenant)
	}
}

// A tenant header sent empty is a malformed tenant, refused as the Kafka
// decoder refuses an empty tenant header: not a request naming none that
// lands in tenancy.default (a collector whose header is templated from
// an unset variable would otherwise write every tenant's data as the
// default tenant's).
func TestReceiversRefuseAnEmptyTenant(t *testing.T) {
	pb, _ := traceRequest(t, 1)
	fwd := &forwarded{}
	r := start(t, fwd, nil)
	if got := postHeaders(t, r, pb, http.Header{"X-Scope-Orgid": {""}}); got != http.StatusBadRequest {
		t.Errorf("HTTP with X-Scope-OrgID empty: status %d, want 400", got)
	}
	client := ptraceotlp.NewGRPCClient(grpcConn(t, r))
	for _, v := range []string{"", "  "} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", v)
		if _, err := client.Export(ctx, exportRequest(t, pb)); status.Code(err) != codes.InvalidArgument {
			t.Errorf("gRPC with x-scope-orgid %q: %v, want InvalidArgument", v, err)
		}
	}
	if got := fwd.stored(); len(got) != 0 {
		t.Errorf("forwarded %d requests, as tenant %q; want none", len(got), got[0].tenant)
	}
}

// The gRPC receiver reads x-scope-orgid as the HTTP receiver reads
// X-Scope-OrgID (net/http strips the whitespace around a field value,
// RFC 9110 5.5) and as Flight SQL reads its x-scope-orgid: " team-a " is
// team-a on every entry point, so a tenant written over gRPC is the one
// read back.
func TestGRPCReceiverReadsTheTenantAsHTTPDoes(t *testing.T) {
	pb, _ := traceRequest(t, 1)
	fwd := &forwarded{}
	r := start(t, fwd, nil)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-scope-orgid", " team-a ")
	if _, err := ptraceotlp.NewGRPCClient(grpcConn(t, r)).Export(ctx, exportRequest(t, pb)); err != nil {
		t.Fatalf("gRPC with x-scope-orgid %q: %v", " team-a ", err)
	}
	if got := fwd.stored(); len(got) != 1 || got[0].tenant != "team-a" {
		t.Fatalf("forwarded %+v, want one request of team-a", got)
	}
}
