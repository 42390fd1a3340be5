package directload

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
)

// OTLP/JSON is the Protobuf JSON mapping, in which null is a value of
// every field, read as the field's default ("null is an accepted value
// for all field types and treated as the default value"): a sender
// serialising an unset parent span id, resource or status as null sends a
// valid request. pdata refuses null where it wants a string, a number or
// an object, so such a request was answered 400, which clients do not
// retry: every span of it was dropped. The Vercel AI SDK sends
// {"doubleValue":null} for a non-finite token count or cost.
func TestJSONNullFieldsAreTheirDefaults(t *testing.T) {
	f := newFixture(t)
	l := f.start(0)
	defer l.Close()
	r, err := otlp.Start(otlp.Options{HTTP: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: 64 << 20, DefaultTenant: "default",
		Forward: l, Signals: []string{otel.SignalTraces}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	body := `{"resourceSpans":[{"resource":null,"schemaUrl":null,"scopeSpans":[{"scope":null,"spans":[
		{"traceId":"5b8efff798038103d269b633813fc60e","spanId":"eee19b7ec3c1b176","parentSpanId":null,"traceState":null,"name":"root",
		 "kind":null,"startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000","attributes":null,
		 "droppedAttributesCount":null,"events":null,"links":null,"status":null},
		{"traceId":"5b8efff798038103d269b633813fc60e","spanId":"eee19b7ec3c1b177","parentSpanId":"eee19b7ec3c1b176","name":"child",
		 "startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000",
		 "attributes":[{"key":"k","value":{"stringValue":"v"}},{"key":"unset","value":null},{"key":"gen_ai.usage.cost","value":{"doubleValue":null}}],"status":{"code":2,"message":null}}]}]}]}`
	resp, err := http.Post("http://"+r.Addr["http"]+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("answered %d %s, want 200: the request is valid OTLP/JSON", resp.StatusCode, answer)
	}
	if n := f.count(t, "SELECT count(*) FROM otel_spans WHERE tenant_id = 'default'"); n != 2 {
		t.Fatalf("%d spans stored, want 2", n)
	}
	if n := f.count(t, "SELECT count(*) FROM otel_spans WHERE name = 'child' AND status_code = 'error' AND (span_attributes->>'$.k') = 'v'"); n != 1 {
		t.Fatalf("the child span stored without its status or attribute (%d)", n)
	}
}
