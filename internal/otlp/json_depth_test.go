package otlp

import (
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// An OTLP/JSON request is re-encoded as protobuf and forwarded (decodeWith:
// "so every forwarded message has one encoding"); the consumer (and the
// direct loader) read that protobuf with pdata's decoder, which refuses
// messages nested past its recursion limit, while pdata's JSON decoder
// takes the same request. A JSON request with one span whose attribute
// nests maps 40 deep (legal OTLP: AnyValue kvlist_value holds AnyValues)
// is answered 200 — a full success, the client drops it — and forwarded as
// a message no loader can read: every span of it, the 99 plain ones too,
// is dead-lettered as "not OTLP traces" instead of stored. The same request
// in protobuf is refused 400. A request accepted must be one its loader
// reads (README: "400 / InvalidArgument for a body that is not an export
// request"; the OTLP specification: a 200 means every item was accepted).
func TestJSONRequestItsLoadersCannotReadIsRefused(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i := range 100 {
		s := ss.Spans().AppendEmpty()
		s.SetName("plain")
		s.SetTraceID([16]byte{7, byte(i)})
		s.SetSpanID([8]byte{7, byte(i)})
		if i == 0 {
			s.SetName("deep")
			m := s.Attributes()
			for range 40 {
				m = m.PutEmptyMap("nested")
			}
			m.PutStr("leaf", "v")
		}
	}
	req := ptraceotlp.NewExportRequestFromTraces(td)
	js, err := req.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	fwd := &forwarded{}
	r := start(t, fwd, nil)

	resp, _ := post(t, r, "/v1/traces", contentProto, "", pb, nil)
	t.Logf("the same request in protobuf: %d", resp.StatusCode)

	resp, body := post(t, r, "/v1/traces", contentJSON, "", js, nil)
	if resp.StatusCode != http.StatusOK {
		return // refused: the client is told; nothing silently lost
	}
	d, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fwd.stored() {
		var out sink.Batch
		n, err := d.AppendRows(&out, &kgo.Record{Value: c.body, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(c.tenant)}}})
		if err != nil {
			t.Errorf("the JSON request was answered 200 %s, and its forwarded message is dead-lettered whole by the loader: %v (%d of 100 spans stored)",
				body, err, n)
		}
	}
}
