package otlp

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// A protobuf request whose scopes are in the deprecated field 1000 (a
// sender on OTLP 0.15 to 0.18) was counted by the receiver, which decodes
// with pdata's export request and so moves them to field 2 (pdata,
// ptrace/ptraceotlp/request.go: UnmarshalProto calls otlp.MigrateTraces),
// answered 200 and forwarded as it came; its loaders decoded the message
// with pdata's ProtoUnmarshaler, which does not move them
// (ptrace/pb.go), and found no span, log record or point: the acknowledged
// request stored no row. Its loaders must find what the receiver counted:
// the same rows as the request in today's layout.
func TestDeprecatedScopeFieldRequestIsStored(t *testing.T) {
	pb, _ := traceRequest(t, 3)
	ld := plog.NewLogs()
	for _, body := range []string{"a", "b"} {
		ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr(body)
	}
	logs, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("queue_depth")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(7)
	metrics, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		signal, path string
		body         []byte
		rows         int
	}{{Traces, "/v1/traces", pb, 3}, {Logs, "/v1/logs", logs, 2}, {Metrics, "/v1/metrics", metrics, 1}} {
		t.Run(c.signal, func(t *testing.T) {
			dec, err := otel.NewDecoder(c.signal, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "x"})
			if err != nil {
				t.Fatal(err)
			}
			rowsOfBody := func(body []byte) []byte {
				var b sink.Batch
				if _, err := dec.AppendRows(&b, &kgo.Record{Value: body, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("team-a")}}}); err != nil {
					t.Fatal(err)
				}
				return b.Rows
			}
			want := rowsOfBody(c.body)
			if n := bytes.Count(want, []byte("\n")); n != c.rows {
				t.Fatalf("the request in today's layout makes %d rows, want %d", n, c.rows)
			}
			old := withDeprecatedScopes(t, c.body)
			if bytes.Equal(old, c.body) {
				t.Fatal("the request was not rewritten")
			}
			fwd := &forwarded{}
			r := start(t, fwd, nil)
			resp, out := post(t, r, c.path, contentProto, "", old, map[string]string{"X-Scope-OrgID": "team-a"})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			got := fwd.stored()
			if len(got) != 1 {
				t.Fatalf("answered 200 with %d forwards, want 1", len(got))
			}
			if rows := rowsOfBody(got[0].body); !bytes.Equal(rows, want) {
				t.Errorf("the acknowledged request loads as %d rows:\n%s\nwant %d:\n%s", bytes.Count(rows, []byte("\n")), rows, c.rows, want)
			}
		})
	}
}

// withDeprecatedScopes rewrites an export request (protobuf) so that each
// resource's scopes are in the deprecated field 1000
// (instrumentation_library_spans / _logs / _metrics of OTLP 0.15 to 0.18)
// instead of field 2 (scope_spans / _logs / _metrics): the layout of a
// sender on those protocol versions that still fills the deprecated field.
// The three signals lay out their resources alike (opentelemetry-proto,
// trace/v1/trace.proto, logs/v1/logs.proto, metrics/v1/metrics.proto at
// v0.18.0).
func withDeprecatedScopes(t *testing.T, req []byte) []byte {
	t.Helper()
	var rewrite func(b []byte, field protowire.Number, f func([]byte) (protowire.Number, []byte)) []byte
	rewrite = func(b []byte, field protowire.Number, f func([]byte) (protowire.Number, []byte)) []byte {
		var out []byte
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("not protobuf: %v", protowire.ParseError(n))
			}
			b = b[n:]
			if typ != protowire.BytesType {
				m := protowire.ConsumeFieldValue(num, typ, b)
				out = protowire.AppendTag(out, num, typ)
				out = append(out, b[:m]...)
				b = b[m:]
				continue
			}
			v, m := protowire.ConsumeBytes(b)
			b = b[m:]
			if num == field {
				num, v = f(v)
			}
			out = protowire.AppendTag(out, num, typ)
			out = protowire.AppendBytes(out, v)
		}
		return out
	}
	return rewrite(req, 1, func(resource []byte) (protowire.Number, []byte) {
		return 1, rewrite(resource, 2, func(scope []byte) (protowire.Number, []byte) { return 1000, scope })
	})
}
