package otel

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Signals an OTLP message can hold; the OpenTelemetry Collector's Kafka
// exporter writes each to its own topic.
const (
	SignalTraces  = "traces"
	SignalLogs    = "logs"
	SignalMetrics = "metrics"
)

// SignalHeader is the Kafka header in which tracelake's receivers name a
// forwarded message's signal, so that signals can share a topic.
// config refuses it as tenancy.kafka_header.
const SignalHeader = config.OTLPSignalHeader

// TopicSignalsHeader is the Kafka header in which tracelake's receivers
// name every signal they forward to a message's topic, comma separated.
const TopicSignalsHeader = config.OTLPTopicSignalsHeader

// header is the value of r's first header named key, and whether it has one.
func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// othersMessage tells what a loader of signal does with r, a message
// whose SignalHeader names another signal: nil to skip it, on a topic its
// own signal shares (otlp.forward.topic), where that signal's loader
// stores it; else why it is dead-lettered. The header is what the
// message's own receivers forward to its topic: receivers of another
// otlp.forward (a fleet changing its topics) may share the topic where
// these did not, and the dead letter is then a copy of a request that
// signal's loader stores, which its reason says may be. A loader of the wrong
// kafka.signal, or one whose group another signal's loader shares, would
// otherwise skip requests acknowledged to their clients that no loader
// stores, and commit past them. Messages of releases that did not name
// their topic's signals are skipped, as then.
func othersMessage(r *kgo.Record, signal, other string) error {
	shared, ok := header(r, TopicSignalsHeader)
	if !ok || slices.Contains(strings.Split(shared, ","), signal) {
		return nil
	}
	return fmt.Errorf("an OTLP %s request, on a topic its receivers forward %s to (header %s): this loader (kafka.signal %s) does not store it; unless a loader of kafka.signal %s in a kafka.group of its own reads the topic, it is stored nowhere",
		other, shared, TopicSignalsHeader, signal, other)
}

// Encodings of OTLP messages: the Collector's Kafka exporter's otlp_proto
// (an Export…ServiceRequest in protobuf) and otlp_json (the same in OTLP
// JSON: hex ids, integer enums, 64-bit integers as strings).
const (
	EncodingProto = "otlp_proto"
	EncodingJSON  = "otlp_json"
)

// Decoder turns OTLP messages of one signal and encoding into rows of its
// table. Safe for concurrent use.
type Decoder struct {
	signal string
	// genai, when set, also makes a genai_operations row of each GenAI
	// span (Batch.Derived), with its span's coordinates.
	genai    *genai.Mapper
	traces   ptrace.Unmarshaler
	logs     plog.Unmarshaler
	metrics  pmetric.Unmarshaler
	tenancy  Tenancy
	kindName string // what the message should be, for errors
	// maxRowBytes, when not 0, is the most bytes of rows one message may
	// decode to (WithMaxRowBytes).
	maxRowBytes int
}

// Tenancy says where a record's tenant comes from.
type Tenancy struct {
	// Header is the Kafka header holding the tenant id; "" for none.
	Header string
	// Default is the tenant of records without the header.
	Default string
}

// NewDecoder returns the decoder of signal in encoding.
func NewDecoder(signal, encoding string, tn Tenancy) (*Decoder, error) {
	d := &Decoder{signal: signal, tenancy: tn}
	switch encoding {
	case EncodingProto:
		d.traces, d.logs, d.metrics = protoTraces{}, protoLogs{}, protoMetrics{}
	case EncodingJSON:
		d.traces, d.logs, d.metrics = jsonTraces{}, jsonLogs{}, jsonMetrics{}
	default:
		return nil, fmt.Errorf("OTLP encoding %q: want %s or %s", encoding, EncodingProto, EncodingJSON)
	}
	switch signal {
	case SignalTraces:
		d.kindName = "OTLP traces (ExportTraceServiceRequest) in " + encoding
	case SignalLogs:
		d.kindName = "OTLP logs (ExportLogsServiceRequest) in " + encoding
	case SignalMetrics:
		d.kindName = "OTLP metrics (ExportMetricsServiceRequest) in " + encoding
	default:
		return nil, fmt.Errorf("OTLP signal %q: want %s, %s or %s", signal, SignalTraces, SignalLogs, SignalMetrics)
	}
	if err := tenancy.CheckTenant(tn.Default); err != nil {
		return nil, fmt.Errorf("default tenant: %w", err)
	}
	return d, nil
}

// The protobuf unmarshalers read a message as an export request: its
// layout is that of TracesData (LogsData, MetricsData), and pdata's export
// request also moves the scopes a sender of OTLP 0.15 to 0.18 put in the
// deprecated field 1000 (instrumentation_library_spans, …) to where the
// rows are read from (ptrace/ptraceotlp/request.go: UnmarshalProto calls
// otlp.MigrateTraces), as its JSON unmarshalers do and its
// ProtoUnmarshalers do not (ptrace/pb.go). The receivers count a request's
// items so and answer 200: read with the ProtoUnmarshaler, such a request
// stored no row.
type (
	protoTraces  struct{}
	protoLogs    struct{}
	protoMetrics struct{}
)

func (protoTraces) UnmarshalTraces(buf []byte) (ptrace.Traces, error) {
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(buf); err != nil {
		return ptrace.Traces{}, err
	}
	return req.Traces(), nil
}

func (protoLogs) UnmarshalLogs(buf []byte) (plog.Logs, error) {
	req := plogotlp.NewExportRequest()
	if err := req.UnmarshalProto(buf); err != nil {
		return plog.Logs{}, err
	}
	return req.Logs(), nil
}

func (protoMetrics) UnmarshalMetrics(buf []byte) (pmetric.Metrics, error) {
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(buf); err != nil {
		return pmetric.Metrics{}, err
	}
	return req.Metrics(), nil
}

// The JSON unmarshalers refuse a message with more than its request
// (CheckOneJSONValue) before pdata reads it: pdata's read the first JSON
// value and ignore what follows, whose rows were lost without a dead
// letter. They also give the scopes of senders older than OTLP 0.19 their
// current names (PrepareJSON), which pdata's skip as unknown keys.
type (
	jsonTraces  struct{}
	jsonLogs    struct{}
	jsonMetrics struct{}
)

func (jsonTraces) UnmarshalTraces(buf []byte) (ptrace.Traces, error) {
	buf, err := PrepareJSON(SignalTraces, buf)
	if err != nil {
		return ptrace.Traces{}, err
	}
	return (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(buf)
}

func (jsonLogs) UnmarshalLogs(buf []byte) (plog.Logs, error) {
	buf, err := PrepareJSON(SignalLogs, buf)
	if err != nil {
		return plog.Logs{}, err
	}
	return (&plog.JSONUnmarshaler{}).UnmarshalLogs(buf)
}

func (jsonMetrics) UnmarshalMetrics(buf []byte) (pmetric.Metrics, error) {
	buf, err := PrepareJSON(SignalMetrics, buf)
	if err != nil {
		return pmetric.Metrics{}, err
	}
	return (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(buf)
}

// TableOf is the table of a signal's rows.
func TableOf(signal string) *schema.Table {
	switch signal {
	case SignalLogs:
		return &Logs
	case SignalMetrics:
		return &Metrics
	}
	return &Spans
}

// WithMaxRowBytes makes the decoder refuse a message whose rows take more
// than n bytes, having written no more than about n of them. Every row of
// a resource (or scope) repeats its attributes, so a small message can
// decode to any multiple of its size: 16 KiB of resource attributes over
// thousands of empty spans, a few bytes each in protobuf, is gigabytes of
// rows, which would exhaust the process's memory at every attempt to
// read it. The pipeline gives max_inflight_bytes: rows past it cannot be
// held anyway.
func (d *Decoder) WithMaxRowBytes(n int64) *Decoder {
	d.maxRowBytes = int(min(n, math.MaxInt))
	return d
}

// WithGenAI makes the decoder of traces also write a genai_operations row
// of each GenAI span into Batch.Derived, read by m.
func (d *Decoder) WithGenAI(m *genai.Mapper) *Decoder { d.genai = m; return d }

// AppendRows appends the rows of r's message to b.Rows, one NDJSON line
// each (and the rows derived from them to b.Derived), raises b.MaxLine,
// and returns the count of rows. A message that is not OTLP of the
// decoder's signal and encoding, or whose tenant is not valid, leaves b as
// it was and returns why.
func (d *Decoder) AppendRows(b *sink.Batch, r *kgo.Record) (rows int, err error) {
	if other, _ := header(r, SignalHeader); other != "" && other != d.signal {
		// Another signal's message: on a shared topic
		// (otlp.forward.topic) its own loader stores it, and here it
		// holds no row.
		return 0, othersMessage(r, d.signal, other)
	}
	rowsLen, derivedLen := len(b.Rows), len(b.Derived)
	defer func() {
		// A message that makes decoding panic must not stop the pipeline
		// at every restart: it is dead-lettered with the panic.
		if p := recover(); p != nil {
			rows, err = 0, fmt.Errorf("decoding %s failed: %v", d.kindName, p)
		}
		if err != nil {
			b.Rows, b.Derived = b.Rows[:rowsLen], b.Derived[:derivedLen]
		}
	}()
	tenant, err := d.tenant(r)
	if err != nil {
		return 0, err
	}
	frags := newFragments()
	defer frags.release()
	src := source{topic: r.Topic, partition: r.Partition, offset: r.Offset, tenant: tenant}
	src.coordinates = frags.coordinates(src)
	w := row{b: b.Rows}
	if d.maxRowBytes > 0 {
		w.limit = len(b.Rows) + d.maxRowBytes
	}
	var longest int
	switch d.signal {
	case SignalLogs:
		logs, err := d.logs.UnmarshalLogs(r.Value)
		if err != nil {
			return 0, d.notOTLP(err)
		}
		rows, longest = appendLogs(&w, logs, src, frags)
	case SignalMetrics:
		metrics, err := d.metrics.UnmarshalMetrics(r.Value)
		if err != nil {
			return 0, d.notOTLP(err)
		}
		rows, longest = appendMetrics(&w, metrics, src, frags)
	default:
		traces, err := d.traces.UnmarshalTraces(r.Value)
		if err != nil {
			return 0, d.notOTLP(err)
		}
		ops := operations{mapper: d.genai, w: row{b: b.Derived}}
		rows, longest = appendSpans(&w, traces, src, frags, &ops)
		b.Derived = ops.w.b
		longest = max(longest, ops.longest)
	}
	if w.full() {
		// The deferred function drops the rows written (and the derived).
		return 0, fmt.Errorf("%s of %d bytes decodes to more than %d bytes of rows (max_inflight_bytes): its resources' and scopes' attributes are repeated in each of their rows",
			d.kindName, len(r.Value), d.maxRowBytes)
	}
	b.Rows = w.b
	b.MaxLine = max(b.MaxLine, longest)
	return rows, nil
}

func (d *Decoder) notOTLP(err error) error {
	return fmt.Errorf("not %s: %w", d.kindName, err)
}

// tenant is the record's tenant: the one its tenant header names, read as
// the receivers read X-Scope-OrgID (tenancy.Named: one value, trimmed;
// several, or one empty, refused), else the default.
func (d *Decoder) tenant(r *kgo.Record) (string, error) {
	if d.tenancy.Header == "" {
		return d.tenantOfNone(r)
	}
	t, err := tenantIn(d.tenancy.Header, headerValues(r, d.tenancy.Header))
	if err != nil {
		return "", fmt.Errorf("header %s: %w", d.tenancy.Header, err)
	}
	if t == "" {
		return d.tenantOfNone(r)
	}
	return t, nil
}

// headerValues are the values of r's headers named name, in any case:
// header names are case-insensitive where they come from (HTTP metadata
// the Collector passes on).
func headerValues(r *kgo.Record, name string) []string {
	var values []string
	for _, h := range r.Headers {
		if strings.EqualFold(h.Key, name) {
			values = append(values, string(h.Value))
		}
	}
	return values
}

// tenantIn is the tenant values of the header name state, read as the
// receivers read X-Scope-OrgID (tenancy.Named, then checked); "" for none.
func tenantIn(name string, values []string) (string, error) {
	t, err := tenancy.Named(name, values)
	if err == nil && t != "" {
		err = tenancy.CheckTenant(t)
	}
	return t, err
}

// tenantOfNone is the tenant of a record whose tenant header names none:
// the default, unless tracelake's receivers forwarded it (SignalHeader),
// which always name its tenant, in their tenancy.kafka_header: one not
// found where this decoder reads it is in another header (the forwarder's
// and the loader's settings differ), and taken for the default tenant's,
// one tenant's rows would be read as another's. The message is not at
// fault but the setting, so it is not dead-lettered (a dead letter of
// these tables is never loaded: dlq replay has no decoder, and the ledger
// covers its offset) but waits (settingToFix, sink.ErrTransient: its
// partition is read again from it, logged with this reason) until the
// loader runs with the forwarder's header.
//
// A forwarder of tenancy.kafka_header "" (2026-12-01 to 12-03, until
// forward mode refused it) wrote the tenant in a header of an empty name,
// which no setting names: its messages are read as of that tenant.
func (d *Decoder) tenantOfNone(r *kgo.Record) (string, error) {
	if _, forwarded := header(r, SignalHeader); forwarded {
		if unnamed := headerValues(r, ""); len(unnamed) > 0 {
			// One value at least: Named refuses an empty one, so t is not "".
			t, err := tenantIn(`the header ""`, unnamed)
			if err != nil {
				return "", fmt.Errorf("a request forwarded by tracelake's OTLP receivers of tenancy.kafka_header \"\" (before 2026-12-03), its tenant in the header \"\": %w", err)
			}
			return t, nil
		}
		return "", settingToFix{fmt.Sprintf("a request forwarded by tracelake's OTLP receivers (header %s) without the tenant header tenancy.kafka_header (%q) reads: the receivers name its tenant in theirs; set the loader's tenancy.kafka_header to the forwarding process's (the request waits in Kafka until then)",
			SignalHeader, d.tenancy.Header)}
	}
	return d.tenancy.Default, nil
}

// settingToFix is why a message cannot be decoded under this process's
// settings, which a restart with others fixes: a sink.ErrTransient, which
// holds the message (and its partition) in Kafka instead of
// dead-lettering it.
type settingToFix struct{ reason string }

func (e settingToFix) Error() string        { return e.reason }
func (e settingToFix) Is(target error) bool { return target == sink.ErrTransient }

// source is where a message's rows came from, written as each row's
// coordinates.
type source struct {
	topic     string
	partition int32
	offset    int64
	tenant    string
	// coordinates is the fragment of the coordinates of every row of the
	// message (fragments.coordinates); nil: written field by field.
	coordinates []byte
}
