package tempo

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tracelake/tracelake/internal/query/traceql"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// traceRequest is a trace by id request.
type traceRequest struct {
	id string // 32 lowercase hex digits, as the table holds ids
	// startMicros, endMicros are Grafana's window (start and end, Unix
	// seconds) to the microsecond, through the end second; 0, 0 without.
	startMicros, endMicros int64
}

// traceReach is how far before or after Grafana's window a trace's spans
// are read. Tempo answers the whole trace of every block overlapping the
// window (modules/querier: a block is searched when its start and end
// time overlap the request's), and its ingesters cut blocks by
// max_block_duration, so a trace that touches the window comes back whole
// unless it ran for much longer than a block. Reading spans starting
// within traceReach of the window, and answering when the trace (its
// first start to its last end) runs during it, gives the same answer
// with the window still pruning: a trace
// running longer than traceReach beyond the window comes back without
// its farther spans.
const traceReach = time.Hour

// parseTraceRequest reads the trace id and the window as Tempo does
// (pkg/util/traceid.go hexStringToID: hex digits of either case, at most
// 128 bits, shorter ids left-padded with zeros; pkg/api/http.go
// ParseTraceByIDRequest: start and end Unix seconds, end after start).
func parseTraceRequest(r *http.Request) (traceRequest, error) {
	id := r.PathValue("traceID")
	for i, c := range id {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return traceRequest{}, bad("trace IDs can only contain hex characters: invalid character '%c' at position %d", c, i+1)
		}
	}
	if len(id) > 32 {
		return traceRequest{}, bad("trace IDs can't be larger than 128 bits")
	}
	if id == "" {
		return traceRequest{}, bad("please provide a traceID")
	}
	req := traceRequest{id: strings.Repeat("0", 32-len(id)) + strings.ToLower(id)}
	q := r.URL.Query()
	var start, end int64
	for _, p := range []struct {
		name string
		v    *int64
	}{{"start", &start}, {"end", &end}} {
		if s := q.Get(p.name); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return traceRequest{}, bad("invalid %s: %v", p.name, err)
			}
			*p.v = n
		}
	}
	if start != 0 && end != 0 && end <= start {
		return traceRequest{}, bad("http parameter start must be before end. received start=%d end=%d", start, end)
	}
	if start != 0 || end != 0 {
		req.startMicros = start * 1e6
		req.endMicros = (end+1)*1e6 - 1
		if end == 0 {
			req.endMicros = 1<<62 - 1
		}
	}
	return req, nil
}

// traceColumns are the columns a trace is built of, in the order
// buildTrace reads them. JSON columns are read as text.
const traceColumns = `span_id, parent_span_id, trace_state, name, kind, status_code, status_message, ` +
	traceql.StartNanos + ` AS start_ns, duration_ns, CAST(resource_attributes AS VARCHAR), scope_name, scope_version,
	CAST(scope_attributes AS VARCHAR), CAST(span_attributes AS VARCHAR), CAST(events AS VARCHAR) AS events_text, CAST(links AS VARCHAR),
	dropped_attributes_count, dropped_events_count, dropped_links_count, flags, epoch_us(start_time), epoch_us(end_time)`

// findTrace reads a trace's spans, each once (a span loaded twice by a
// client's retry is one span: the copy of the latest start, which is the
// exact one when a copy loaded before start_time_unix_nano existed has
// its start to the microsecond only; of copies of one start, the one of
// the longest events text, which is the exact one when a copy loaded
// before 2026-12-07 has its event times to the microsecond only (a later
// release writes a span's events never shorter: nine digits of each
// time, a whole double as 2.0 since 2026-12-05); two tenants' spans of
// the same ids are two, traceql.SpanKey), at most s.maxSpans: partial is
// true when the trace has more.
func (s *server) findTrace(ctx context.Context, scope tenancy.Scope, req traceRequest) (t *tracepb.TracesData, partial bool, err error) {
	b := traceql.Builder{Table: s.Table}
	windowed := req.startMicros != 0 || req.endMicros != 0
	if windowed {
		reach := traceReach.Microseconds()
		b.StartMicros, b.EndMicros = max(req.startMicros-reach, 1), min(req.endMicros, 1<<62-1-reach)+reach
	}
	idParam := b.Param(req.id)
	table := sqltext.Ident(s.Table)
	from, cols := fmt.Sprintf("%s WHERE trace_id = %s AND %s", table, idParam, b.Window()), traceColumns
	if windowed {
		// A span sent without a start (OTLP's 0, a broken clock) has a
		// NULL start_time, which no window holds: it is a span of the
		// trace all the same, answered as without a window, as Tempo
		// answers the whole trace of a block overlapping the window,
		// found by its end: at or after the first start read (it ends
		// after it starts), however long after (its start, unknown, may
		// be any before its end: within the starts read too), or
		// without an end either. In a branch of its own, so that the
		// window's condition still prunes the other branch's scan (an OR
		// of conditions on two columns is pushed to no scan). Each
		// branch names its columns: a branch selecting * had the Iceberg
		// reader's scan read every column of the table, those no trace
		// is built of too (the columns a scan reads being those its
		// SELECT names).
		from = fmt.Sprintf("(SELECT tenant_id, %[1]s FROM %[2]s UNION ALL SELECT tenant_id, %[1]s FROM %[3]s WHERE trace_id = %[4]s AND %[5]s) AS spans",
			traceColumns, from, table, idParam, b.StartlessSince(b.StartMicros))
		cols = "* EXCLUDE (tenant_id)"
	}
	sql := fmt.Sprintf(`SELECT DISTINCT ON (tenant_id, span_id) %s FROM %s ORDER BY tenant_id, span_id, start_ns DESC, length(events_text) DESC LIMIT %d`,
		cols, from, s.maxSpans+1)
	tb := newTraceBuilder(req.id)
	n := 0
	first, last := int64(math.MaxInt64), int64(math.MinInt64) // the trace's first start and last end (ns)
	err = each(ctx, s.Reader, scope, sql, b.Params, func(r row) error {
		n++
		if n > s.maxSpans {
			partial = true
			return nil
		}
		if !r.null(20) {
			// A span without a start (start_time NULL) has no time to
			// put its trace in the window or out of it: the others'
			// say.
			start, end := spanTimes(r)
			first, last = min(first, start), max(last, end)
		}
		return tb.add(r)
	})
	if err != nil {
		return nil, false, fmt.Errorf("read trace %s: %w", req.id, err)
	}
	if windowed && !(n > 0 && first/1000 <= req.endMicros && last >= req.startMicros*1000) { // in µs: a window open at its end is 1<<62 µs
		// Read around the window but not in it: not found there.
		return newTraceBuilder(req.id).data(), false, nil
	}
	return tb.data(), partial, nil
}

// spanTimes are span r's (traceColumns) start and end in nanoseconds,
// the end held at int64's end as the SQL's (traceql.EndNanos): a span
// may end past 2262, and a wrapped end put its trace outside every
// window.
func spanTimes(r row) (start, end int64) {
	start = r.int(7)
	end = start
	if !r.null(8) {
		end = addNanos(start, r.int(8))
	}
	return start, end
}

// addNanos is a + b held within int64.
func addNanos(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// requestedTrace reads a trace by id request and its trace.
func (s *server) requestedTrace(r *http.Request, scope tenancy.Scope) (*tracepb.TracesData, bool, error) {
	req, err := parseTraceRequest(r)
	if err != nil {
		return nil, false, err
	}
	return s.findTrace(r.Context(), scope, req)
}

// traceV1 answers /api/traces/{id}: the trace as tempopb.Trace (protobuf
// when the Accept header asks for application/protobuf, else JSON with
// its resource spans named batches), 404 when no span is found, 422
// past the span cap (modules/querier/http.go TraceByIDHandler,
// modules/frontend/combiner/trace_by_id.go).
func (s *server) traceV1(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	t, partial, err := s.requestedTrace(r, scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if partial {
		s.routes.Fail(w, http.StatusUnprocessableEntity, fmt.Sprintf("trace exceeds the maximum of %d spans", s.maxSpans))
		return
	}
	if len(t.ResourceSpans) == 0 {
		// The frontend answers 404 with no body when no querier found
		// the trace (combiner/trace_by_id.go NewTraceByID).
		w.WriteHeader(http.StatusNotFound)
		return
	}
	status := http.StatusOK
	if wantsProtobuf(r) {
		body, err := proto.Marshal(t)
		if err != nil {
			s.fail(w, r, fmt.Errorf("marshal trace: %w", err))
			return
		}
		writeBody(w, status, "application/protobuf", body)
		return
	}
	body, err := traceJSON(t, "batches")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeBody(w, status, "application/json", body)
}

// traceV2 answers /api/v2/traces/{id}: tempopb.TraceByIDResponse, 200
// with an empty trace when none is found, status PARTIAL with a message
// past the span cap (modules/querier/http.go TraceByIDHandlerV2,
// modules/frontend/combiner/trace_by_id_v2.go).
func (s *server) traceV2(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	t, partial, err := s.requestedTrace(r, scope)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var msg string
	if partial {
		msg = fmt.Sprintf("Trace exceeds maximum size of %d spans, a partial trace is returned", s.maxSpans)
	}
	if wantsProtobuf(r) {
		body, err := traceByIDResponseProto(t, partial, msg)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeBody(w, http.StatusOK, "application/protobuf", body)
		return
	}
	tj, err := traceJSON(t, "resourceSpans")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// jsonpb's TraceByIDResponse: the trace, the status by name when not
	// COMPLETE (the zero value is left out), the message.
	var sb strings.Builder
	sb.WriteString(`{"trace":`)
	sb.Write(tj)
	if partial {
		fmt.Fprintf(&sb, `,"status":"PARTIAL","message":%s`, strconv.Quote(msg))
	}
	sb.WriteString(`,"metrics":{}}`)
	writeBody(w, http.StatusOK, "application/json", []byte(sb.String()))
}

// traceByIDResponseProto is tempopb.TraceByIDResponse in protobuf: field
// 1 the Trace (whose field 1 is repeated ResourceSpans, as OTLP's
// TracesData), 3 the PartialStatus (PARTIAL = 1), 4 the message
// (pkg/tempopb/tempo.proto).
func traceByIDResponseProto(t *tracepb.TracesData, partial bool, msg string) ([]byte, error) {
	tb, err := proto.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("marshal trace: %w", err)
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, tb)
	if partial {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, msg)
	}
	return b, nil
}

// wantsProtobuf: Tempo answers protobuf when Accept names
// application/protobuf (pkg/api/http.go MarshalingFormatFromAcceptHeader).
func wantsProtobuf(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/protobuf")
}

func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// idBytes decodes a hex id; nil for "".
func idBytes(h string) []byte {
	b, _ := hex.DecodeString(h)
	return b
}

// nanos is a time of the events' JSON (RFC 3339, nanoseconds; in rows
// loaded before 2026-12-07, microseconds) in nanoseconds since the epoch;
// 0 for none.
func nanos(s string) uint64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || s == "" {
		return 0
	}
	return uint64(t.UnixNano())
}
