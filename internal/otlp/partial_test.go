package otlp

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Items the destination dead-lettered instead of storing are answered as
// OTLP's partial success, in every encoding and on gRPC: the count
// (never more than the request held; all of it when the whole request
// was) and the reason; the metrics hear of a partial answer and of the
// items stored.
func TestPartialSuccess(t *testing.T) {
	pb, js := traceRequest(t, 3)
	for _, c := range []struct {
		name   string
		answer Stored
		want   int64
	}{
		{"some", Stored{Rejected: 2, Reason: "unable to cast"}, 2},
		{"all", Stored{All: true, Reason: "not decodable"}, 3},
		{"more than sent", Stored{Rejected: 9, Reason: "unable to cast"}, 3},
		{"none", Stored{}, 0},
		// A reason quoting a value that is not UTF-8 still makes an
		// answer every client decodes (proto3 strings must be UTF-8).
		{"reason not UTF-8", Stored{Rejected: 1, Reason: "bad value \"\xff\xfe\""}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var outcomes []string
			var stored int
			r := start(t, &forwarded{answer: c.answer}, func(o *Options) {
				o.Answered = func(_, _, outcome string, items int) {
					mu.Lock()
					defer mu.Unlock()
					outcomes, stored = append(outcomes, outcome), stored+items
				}
			})
			check := func(how string, got ptraceotlp.ExportPartialSuccess) {
				t.Helper()
				msgOK := got.ErrorMessage() == ""
				if !utf8.ValidString(got.ErrorMessage()) {
					t.Errorf("%s: the partial success's message is not UTF-8: %q", how, got.ErrorMessage())
				}
				if c.want > 0 {
					msgOK = strings.Contains(got.ErrorMessage(), strings.ToValidUTF8(c.answer.Reason, "\uFFFD")) && strings.Contains(got.ErrorMessage(), "dead-letter table")
				}
				if got.RejectedSpans() != c.want || !msgOK {
					t.Errorf("%s: partial success %d %q, want %d rejected and the reason %q", how, got.RejectedSpans(), got.ErrorMessage(), c.want, c.answer.Reason)
				}
			}
			for _, enc := range []string{contentProto, contentJSON} {
				body := map[string][]byte{contentProto: pb, contentJSON: js}[enc]
				resp, out := post(t, r, "/v1/traces", enc, "", body, nil)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: status %d: %s", enc, resp.StatusCode, out)
				}
				got := ptraceotlp.NewExportResponse()
				unmarshal := got.UnmarshalProto
				if enc == contentJSON {
					unmarshal = got.UnmarshalJSON
				}
				if err := unmarshal(out); err != nil {
					t.Fatal(err)
				}
				check(enc, got.PartialSuccess())
			}
			conn := dial(t, r)
			req := ptraceotlp.NewExportRequest()
			if err := req.UnmarshalProto(pb); err != nil {
				t.Fatal(err)
			}
			got, err := ptraceotlp.NewGRPCClient(conn).Export(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			check("gRPC", got.PartialSuccess())
			mu.Lock()
			defer mu.Unlock()
			want := map[bool]string{false: "accepted", true: "partial"}[c.want > 0]
			if len(outcomes) != 3 || outcomes[0] != want || outcomes[2] != want || stored != 3*(3-int(c.want)) {
				t.Errorf("metrics told %v with %d items stored, want %s three times and %d", outcomes, stored, want, 3*(3-int(c.want)))
			}
		})
	}
}

// A receiver that takes one signal refuses the others on both protocols
// as not served, never as a failure to retry, and forwards nothing of them.
func TestSignalsNotServedAreRefused(t *testing.T) {
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.Signals = []string{Traces} })
	logs := plogotlp.NewExportRequestFromLogs(plog.NewLogs())
	logs.Logs().ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
	body, err := logs.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if resp, out := post(t, r, "/v1/logs", contentProto, "", body, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("HTTP logs: status %d: %s", resp.StatusCode, out)
	}
	_, err = plogotlp.NewGRPCClient(dial(t, r)).Export(context.Background(), logs)
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("gRPC logs: %v, want Unimplemented", err)
	}
	if n := len(fwd.stored()); n != 0 {
		t.Errorf("%d requests of a signal not served were forwarded", n)
	}
}

func dial(t *testing.T, r *Receivers) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(r.Addr["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
