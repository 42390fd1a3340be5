// Package otlp receives OpenTelemetry data over OTLP/HTTP and OTLP/gRPC
// and hands each accepted request to a Forwarder, answering the client
// only once it is stored: KafkaForwarder writes it to Kafka and returns on
// the broker's acknowledgement (the consumer group then loads it exactly
// once like any OTLP topic; receivers scale behind a load balancer,
// loaders by group members), package directload loads it into the sink.
package otlp

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/otel"
)

// Signal names, as kafka.signal spells them.
const (
	Traces  = "traces"
	Logs    = "logs"
	Metrics = "metrics"
)

// signal is what differs between traces, logs and metrics: the HTTP path
// and how a request is read and an answer written (pdata's wire formats).
type signal struct {
	name string
	path string
	// decode reads a request body (protobuf, or OTLP JSON) and returns it
	// as protobuf with the number of spans, log records or points in it,
	// and as pdata (ptrace.Traces, plog.Logs, pmetric.Metrics).
	decode func(body []byte, isJSON bool) (proto []byte, items int, data any, err error)
	// response is the answer to a stored request.
	response func(accepted) response
}

// request is the part of pdata's export requests a signal needs.
type request interface {
	UnmarshalProto([]byte) error
	UnmarshalJSON([]byte) error
	MarshalProto() ([]byte, error)
}

type response interface {
	MarshalProto() ([]byte, error)
	MarshalJSON() ([]byte, error)
}

// decodeWith reads body, a request of signal, into req; a protobuf body is
// forwarded as it came (it decoded, so it is valid), a JSON body
// re-encoded as protobuf so every forwarded message has one encoding, and
// decoded once more (into check, an empty request) as its loaders will
// decode it: pdata's JSON decoder takes a request its protobuf decoder
// refuses (values nested past the protobuf decoder's recursion limit),
// which answered 200 would be dead-lettered whole by every loader.
func decodeWith(signal string, req, check request, count func() int, body []byte, isJSON bool) ([]byte, int, error) {
	if isJSON {
		// pdata reads the first JSON value alone: more after it (a
		// second request, garbage) would be answered stored and lost;
		// and it skips the scopes of senders older than OTLP 0.19,
		// which would be answered as an empty request, stored.
		body, err := otel.PrepareJSON(signal, body)
		if err != nil {
			return nil, 0, err
		}
		if err := req.UnmarshalJSON(body); err != nil {
			return nil, 0, err
		}
		proto, err := req.MarshalProto()
		if err != nil {
			return nil, 0, err
		}
		if err := check.UnmarshalProto(proto); err != nil {
			return nil, 0, fmt.Errorf("the request as protobuf, as it is forwarded and loaded, does not decode: %w", err)
		}
		return proto, count(), nil
	}
	if err := req.UnmarshalProto(body); err != nil {
		return nil, 0, err
	}
	return body, count(), nil
}

func encode(r response, isJSON bool) ([]byte, error) {
	if isJSON {
		return r.MarshalJSON()
	}
	return r.MarshalProto()
}

var signals = []signal{
	{
		name: Traces, path: "/v1/traces",
		decode: func(body []byte, isJSON bool) ([]byte, int, any, error) {
			req := ptraceotlp.NewExportRequest()
			proto, items, err := decodeWith(Traces, req, ptraceotlp.NewExportRequest(), func() int { return req.Traces().SpanCount() }, body, isJSON)
			return proto, items, req.Traces(), err
		},
		response: func(a accepted) response { return tracesResponse(a) },
	},
	{
		name: Logs, path: "/v1/logs",
		decode: func(body []byte, isJSON bool) ([]byte, int, any, error) {
			req := plogotlp.NewExportRequest()
			proto, items, err := decodeWith(Logs, req, plogotlp.NewExportRequest(), func() int { return req.Logs().LogRecordCount() }, body, isJSON)
			return proto, items, req.Logs(), err
		},
		response: func(a accepted) response { return logsResponse(a) },
	},
	{
		name: Metrics, path: "/v1/metrics",
		decode: func(body []byte, isJSON bool) ([]byte, int, any, error) {
			req := pmetricotlp.NewExportRequest()
			proto, items, err := decodeWith(Metrics, req, pmetricotlp.NewExportRequest(), func() int { return req.Metrics().DataPointCount() }, body, isJSON)
			return proto, items, req.Metrics(), err
		},
		response: func(a accepted) response { return metricsResponse(a) },
	},
}

// itemNames name a signal's items as the OTLP partial success does.
var itemNames = map[string]string{Traces: "spans", Logs: "log records", Metrics: "data points"}

// The answers to a stored request: empty for full success, else a
// partial success with the items rejected and why (the OTLP
// specification: the client must not retry them).
func tracesResponse(a accepted) ptraceotlp.ExportResponse {
	resp := ptraceotlp.NewExportResponse()
	if a.rejected > 0 {
		resp.PartialSuccess().SetRejectedSpans(int64(a.rejected))
		resp.PartialSuccess().SetErrorMessage(a.reason)
	}
	return resp
}

func logsResponse(a accepted) plogotlp.ExportResponse {
	resp := plogotlp.NewExportResponse()
	if a.rejected > 0 {
		resp.PartialSuccess().SetRejectedLogRecords(int64(a.rejected))
		resp.PartialSuccess().SetErrorMessage(a.reason)
	}
	return resp
}

func metricsResponse(a accepted) pmetricotlp.ExportResponse {
	resp := pmetricotlp.NewExportResponse()
	if a.rejected > 0 {
		resp.PartialSuccess().SetRejectedDataPoints(int64(a.rejected))
		resp.PartialSuccess().SetErrorMessage(a.reason)
	}
	return resp
}
