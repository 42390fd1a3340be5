// Package genai reads one GenAI operation out of a span, whatever
// instrumented it: the OpenTelemetry GenAI semantic conventions (current
// and deprecated names), OpenInference (Arize Phoenix), Traceloop
// (OpenLLMetry), Claude Code's own spans and the Vercel AI SDK's
// embedding calls, and prices it. Each column's
// attribute names, in order of precedence, are the table in mapping.go.
package genai

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"golang.org/x/mod/semver"

	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/schema"
)

// The conventions, as the convention column names them.
const (
	OTel          = "otel"
	OpenInference = "openinference"
	Traceloop     = "traceloop"
	ClaudeCode    = "claude_code"
	VercelAI      = "vercel_ai"
)

// Span is what an operation is read from.
type Span struct {
	Name       string
	Attributes pcommon.Map
	// StatusError is true when the span's status is error.
	StatusError bool
	Start       time.Time
	// ScopeName and ScopeVersion are the span's instrumentation scope:
	// they tell releases of one instrumentation apart where their
	// attributes do not (inputWithoutCache).
	ScopeName, ScopeVersion string
}

// Operation is one GenAI operation. A column the span does not carry, or
// carries with a value of the wrong type, is null: a nil pointer or slice,
// or "".
type Operation struct {
	Convention, Operation, Provider      string
	RequestModel, ResponseModel          string
	InputTokens, OutputTokens            *int64
	TotalTokens, CacheReadTokens         *int64
	CacheCreationTokens, ReasoningTokens *int64
	Temperature                          *float64
	MaxTokens                            *int64
	FinishReasons                        []string
	ToolName, ToolCallID, AgentName      string
	ConversationID, UserID, ErrorType    string
	Status                               string // ok or error
	// InputMessages and OutputMessages are JSON arrays of messages, nil
	// unless content capture is on.
	InputMessages, OutputMessages []byte

	// Price is the price used, nil when the model has none (then Cost
	// is zero and the cost columns null).
	Price *prices.Found
	Cost  prices.Cost
}

// Stats count what reading operations met, for /metrics. Safe for
// concurrent use; they grow each time a span is decoded (a span read
// again after a restart counts again).
type Stats struct {
	Operations atomic.Int64
	Unpriced   atomic.Int64 // operations with tokens and no price for their model, a priced count not a number, or cache counts past the input
	// CostOutOfRange counts operations whose tokens cost more than the
	// cost columns hold (prices.MaxCost): a bogus count; no cost is stored.
	CostOutOfRange atomic.Int64
	// Invalid counts values of the wrong type (a token count "abc"), by
	// column: the column is null, the operation kept.
	Invalid [numColumns]atomic.Int64
}

// Mapper reads operations. Safe for concurrent use.
type Mapper struct {
	prices  *prices.Table
	content bool
	stats   *Stats
}

// NewMapper returns a Mapper pricing by table (nil: no prices); content
// keeps the input and output messages spans carry.
func NewMapper(table *prices.Table, content bool) *Mapper {
	return &Mapper{prices: table, content: content, stats: &Stats{}}
}

// Stats returns the mapper's counters.
func (m *Mapper) Stats() *Stats { return m.stats }

// A marker is the convention a marking attribute names (Marker).
type marker uint8

const (
	markOTel       marker = 1 << iota // current OpenTelemetry names
	markDeprecated                    // the deprecated gen_ai.system alone
	markOI                            // OpenInference
	markTL                            // Traceloop
	markVercel                        // the Vercel AI SDK's model calls without gen_ai.*
)

// Marker is an attribute that makes a span a GenAI operation: present
// with any value (even empty), or, when Values is set, holding one of
// them as its text (pcommon.Value.AsString; none of them is the text of
// a number, a boolean, an array, an object or base64 bytes, so a value
// of another type never holds one, in the spans table's JSON either).
type Marker struct {
	Attr   string
	Values []string
	mark   marker
}

// marks reports whether the attribute k of attrs is this marker. A
// marker of values reads the key's first value (pcommon.Map.Get): the
// one the span holds where OTLP repeats a key (which it forbids), as
// otel_spans stores it and a rebuild and verify read it.
func (m *Marker) marks(attrs pcommon.Map, k string) bool {
	if m.Attr != k {
		return false
	}
	if m.Values == nil {
		return true
	}
	v, _ := attrs.Get(k)
	return slices.Contains(m.Values, v.AsString())
}

// vercelEmbedCalls are the Vercel AI SDK's ai.operationId values of its
// embedding model calls, one span per call to the model (embedMany makes
// one per chunk of its values). Their spans carry no gen_ai.* attribute,
// only ai.*, as do the spans of the ai.embed and ai.embedMany around them
// with the same usage (vercel/ai, packages/ai/src/embed/embed.ts and
// embed-many.ts; packages/otel/src/legacy-open-telemetry.ts): the id's
// value is all that tells a call from the call around it, which is no
// operation (its tokens are the calls', counted twice).
var vercelEmbedCalls = []string{"ai.embed.doEmbed", "ai.embedMany.doEmbed"}

// markers are the attributes that make a span a GenAI operation, with
// the convention each marks. Convention reads them, and so does verify
// (OperationMarkers) to find, in each sink's SQL, the spans that must
// have an operation: one list, so the two cannot disagree.
var markers = [...]Marker{
	{Attr: "gen_ai.operation.name", mark: markOTel}, {Attr: "gen_ai.provider.name", mark: markOTel},
	{Attr: "gen_ai.system", mark: markDeprecated},
	{Attr: "openinference.span.kind", mark: markOI}, {Attr: "llm.model_name", mark: markOI},
	{Attr: "llm.system", mark: markOI}, {Attr: "llm.provider", mark: markOI},
	{Attr: "traceloop.span.kind", mark: markTL}, {Attr: "llm.request.type", mark: markTL},
	{Attr: "ai.operationId", Values: vercelEmbedCalls, mark: markVercel},
}

// ClaudeCodePrefix begins the name of Claude Code's spans, each of which
// is an operation whatever its attributes.
const ClaudeCodePrefix = "claude_code."

// OperationMarkers are the markers any of which makes a span an
// operation; so does a name starting ClaudeCodePrefix, and nothing else
// (Convention).
func OperationMarkers() []Marker {
	out := slices.Clone(markers[:])
	for i := range out {
		out[i].Values = slices.Clone(out[i].Values) // the caller's to change
	}
	return out
}

// markerOf is the convention the attribute k of attrs marks, 0 for
// none.
func markerOf(attrs pcommon.Map, k string) marker {
	for i := range markers {
		if markers[i].marks(attrs, k) {
			return markers[i].mark
		}
	}
	return 0
}

// Convention returns the convention that marks s as a GenAI operation, or
// "" when none does. A span carrying several is attributed to the first
// of: current OpenTelemetry names (gen_ai.operation.name,
// gen_ai.provider.name), OpenInference, Traceloop, Claude Code, the
// deprecated OpenTelemetry gen_ai.system alone, then the Vercel AI SDK's
// ai.operationId of a model call that carries no gen_ai.* attribute.
func Convention(s *Span) string {
	var marks marker
	s.Attributes.Range(func(k string, _ pcommon.Value) bool {
		marks |= markerOf(s.Attributes, k)
		return marks&markOTel == 0 // the first in precedence: no need to read on
	})
	switch {
	case marks&markOTel != 0:
		return OTel
	case marks&markOI != 0:
		return OpenInference
	case marks&markTL != 0:
		return Traceloop
	case strings.HasPrefix(s.Name, ClaudeCodePrefix):
		return ClaudeCode
	case marks&markDeprecated != 0:
		return OTel
	case marks&markVercel != 0:
		return VercelAI
	}
	return ""
}

// Map reads s's operation; ok is false when s is not a GenAI operation.
func (m *Mapper) Map(s *Span) (op Operation, ok bool) {
	op.Convention = Convention(s)
	if op.Convention == "" {
		return op, false
	}
	m.stats.Operations.Add(1)
	r := reader{attrs: s.Attributes, stats: m.stats, claude: strings.HasPrefix(s.Name, ClaudeCodePrefix)}
	op.Operation = r.operation(s.Name)
	op.Provider = r.provider()
	op.RequestModel = r.str(colRequestModel)
	op.ResponseModel = r.str(colResponseModel)
	if op.Convention == ClaudeCode {
		// Claude Code calls Anthropic's models, on Anthropic's API or,
		// configured so (CLAUDE_CODE_USE_BEDROCK), on Bedrock, whose model
		// ids it then calls and names: Bedrock's.
		op.Provider = "anthropic"
		if prices.BedrockModel(op.ResponseModel) || (op.ResponseModel == "" && prices.BedrockModel(op.RequestModel)) {
			op.Provider = "aws.bedrock"
		}
	}
	// The provider's API counts the tokens, but Anthropic's models on
	// Vertex AI count them as Anthropic's API does: read as Gemini's, their
	// cache reads were taken out of an input that never held them.
	anthropic := r.anthropicOnCloud()
	holdsCache := inputHoldsCache[op.Provider] && !anthropic
	r.holdsCache = holdsCache
	var fromClaude bool
	op.InputTokens, fromClaude = r.intFrom(colInputTokens)
	op.OutputTokens, _ = r.intFrom(colOutputTokens)
	op.CacheReadTokens, _ = r.intFrom(colCacheReadTokens)
	op.CacheCreationTokens, _ = r.intFrom(colCacheCreationTokens)
	op.ReasoningTokens, _ = r.intFrom(colReasoningTokens)
	// A count that is not a number is not known: neither is a sum of it.
	unknown := r.bad[colInputTokens] || r.bad[colOutputTokens]
	if fromClaude && op.InputTokens != nil {
		// Claude Code's input_tokens is the API's: without the cache
		// reads and writes, which input_tokens here always includes.
		if r.bad[colCacheReadTokens] || r.bad[colCacheCreationTokens] {
			op.InputTokens, unknown = nil, true
		} else {
			op.InputTokens = sum(*op.InputTokens, deref(op.CacheReadTokens), deref(op.CacheCreationTokens))
			unknown = unknown || op.InputTokens == nil // past the range
		}
	}
	if inputWithoutCache(s, op.Provider) && op.InputTokens != nil {
		if r.bad[colCacheReadTokens] || r.bad[colCacheCreationTokens] {
			op.InputTokens, unknown = nil, true
		} else {
			op.InputTokens = sum(*op.InputTokens, deref(op.CacheReadTokens), deref(op.CacheCreationTokens))
			unknown = unknown || op.InputTokens == nil // past the range
		}
	}
	op.TotalTokens, _ = r.intFrom(colTotalTokens)
	if !fromClaude && !unknown && !r.bad[colCacheReadTokens] && !r.bad[colCacheCreationTokens] &&
		!holdsCache && op.InputTokens != nil && op.OutputTokens != nil && op.TotalTokens != nil {
		// An input count without its cache (Anthropic's and Bedrock's
		// APIs count it so, and Strands Agents passes Bedrock's on) shows
		// in a total of the span's own that adds the cache to input and
		// output: input + output is the total only when the input holds
		// its cache. Read as it came, the input was short of its cache
		// (the cache reads past it left the operation unpriced; fewer
		// were priced out of the input, too cheap).
		if cache := sum(deref(op.CacheReadTokens), deref(op.CacheCreationTokens)); cache != nil && *cache > 0 {
			if all := sum(*op.InputTokens, *op.OutputTokens, *cache); all != nil && *all == *op.TotalTokens {
				op.InputTokens = sum(*op.InputTokens, *cache)
			}
		}
	}
	if !fromClaude && !unknown && !r.bad[colCacheReadTokens] && !r.bad[colCacheCreationTokens] && op.InputTokens != nil {
		// A cache larger than the input it would be part of is not part
		// of it, whatever the convention says: the input was counted
		// without it (Bedrock's and Anthropic's APIs count so; Pydantic AI
		// v1.31.0-v1.39.0 passed Bedrock's on under its details names).
		// Taken as part of it, the uncached input came out negative and
		// the operation went unpriced. A smaller cache stays ambiguous
		// and is read as the convention says.
		if cache := sum(deref(op.CacheReadTokens), deref(op.CacheCreationTokens)); cache != nil && *cache > *op.InputTokens {
			op.InputTokens = sum(*op.InputTokens, *cache)
		}
	}
	if outputWithoutReasoning[op.Provider] && !anthropic && !unknown && !r.bad[colReasoningTokens] &&
		op.InputTokens != nil && op.OutputTokens != nil && op.TotalTokens != nil {
		// These APIs count the reasoning apart from the output and bill
		// it as output: Gemini's candidates_token_count leaves its
		// thoughts out (thoughts_token_count; total_token_count has both),
		// xAI's completion_tokens its reasoning_tokens. genai-prices'
		// extractors (prices/data.json: google's default flavour, x-ai's)
		// add them to output_tokens. Instrumentations that pass the
		// output on as it comes (OpenLLMetry's google-generativeai and
		// vertexai, OpenInference's vertexai) leave them in the span's
		// total alone: read as it came, a thinking call was priced as if
		// it had not thought. The total's excess over input + output is
		// that reasoning, unless the span reports a reasoning count that
		// differs (then the output holds it already, as OpenInference's
		// google-genai folds the thoughts in, and the excess is something
		// else).
		if excess := sum(*op.TotalTokens, -*op.InputTokens, -*op.OutputTokens); excess != nil && *excess > 0 &&
			(op.ReasoningTokens == nil || *op.ReasoningTokens == *excess) {
			op.OutputTokens = sum(*op.OutputTokens, *excess)
			op.ReasoningTokens = excess
		}
	}
	if op.TotalTokens == nil && !unknown && (op.InputTokens != nil || op.OutputTokens != nil) {
		op.TotalTokens = sum(deref(op.InputTokens), deref(op.OutputTokens))
	}
	op.Temperature = r.float(colTemperature)
	op.MaxTokens, _ = r.intFrom(colMaxTokens)
	op.FinishReasons = r.finishReasons()
	op.ToolName = r.str(colToolName)
	op.ToolCallID = r.str(colToolCallID)
	op.AgentName = r.str(colAgentName)
	op.ConversationID = r.str(colConversationID)
	op.UserID = r.str(colUserID)
	op.ErrorType = r.str(colErrorType)
	op.Status = "ok"
	if s.StatusError || op.ErrorType != "" {
		op.Status = "error"
		if op.ErrorType == "" {
			// The conventions' value for an error of no known type.
			op.ErrorType = "_OTHER"
		}
	}
	if m.content {
		op.InputMessages = r.messages(inputMessages)
		op.OutputMessages = r.messages(outputMessages)
	}
	if r.bad[colInputTokens] || r.bad[colOutputTokens] || r.bad[colCacheReadTokens] || r.bad[colCacheCreationTokens] || r.bad[colReasoningTokens] {
		// A count the cost depends on is unknown: a cost without it would
		// be too low, and look right.
		m.stats.Unpriced.Add(1)
	} else {
		m.price(&op, s.Start)
	}
	return op, true
}

// price sets op's price and cost: the response model's (the one that
// ran), else the request model's, valid at the span's start (today's for a
// span without one).
func (m *Mapper) price(op *Operation, at time.Time) {
	if op.InputTokens == nil && op.OutputTokens == nil {
		return // nothing to price (a tool call, an agent)
	}
	if at.IsZero() || at.Equal(time.Unix(0, 0)) {
		// No start (OTLP's 0 reads as the epoch): today's prices, as
		// genai-prices prices a call given no timestamp (calcPrice's
		// default), not a model's first price.
		at = time.Now()
	}
	if m.prices != nil {
		for _, model := range []string{op.ResponseModel, op.RequestModel} {
			if model == "" {
				continue
			}
			if f, ok := m.prices.Find(op.Provider, model, at); ok {
				cost, err := f.Prices.Cost(prices.Usage{
					Input: deref(op.InputTokens), CacheRead: deref(op.CacheReadTokens),
					CacheWrite: deref(op.CacheCreationTokens), Output: deref(op.OutputTokens),
					Reasoning: deref(op.ReasoningTokens),
				})
				switch {
				case errors.Is(err, prices.ErrCostOutOfRange):
					m.stats.CostOutOfRange.Add(1)
					return
				case err != nil:
					m.stats.Unpriced.Add(1)
					return
				}
				op.Price, op.Cost = &f, cost
				return
			}
		}
	}
	m.stats.Unpriced.Add(1)
}

// inputWithoutCache tells an input count that leaves its cache out by
// the release that wrote it, where nothing else on the span does:
// Pydantic AI's Bedrock model from v1.31.0 (prompt caching for Bedrock)
// to v1.39.0 passed Converse's inputTokens on as input_tokens, which
// Bedrock counts without the cache (v1.39.1, "Fix input_tokens
// calculation for Bedrock model", adds it). Its spans' scope is
// pydantic-ai at the package's version (models/instrumented.py).
func inputWithoutCache(s *Span, provider string) bool {
	if s.ScopeName != "pydantic-ai" || provider != "aws.bedrock" {
		return false
	}
	v := "v" + s.ScopeVersion
	// A version semver cannot read (PEP 440's 1.40.0b1) is none of them:
	// those releases are 1.31.0 to 1.39.0, all plain.
	return semver.IsValid(v) && semver.Prerelease(v) == "" &&
		semver.Compare(v, "v1.31.0") >= 0 && semver.Compare(v, "v1.39.0") <= 0
}

// inputHoldsCache are the providers whose APIs count the input with its
// cache, so that a span's total of input + output + cache reads and writes
// is a coincidence, never an input without its cache: Gemini's total holds
// the thoughts its output count leaves out (OpenLLMetry's
// google-generativeai instrumentation: input prompt_token_count, output
// candidates_token_count, total total_token_count), and xAI's and
// Gemini's OpenAI-compatible totals hold reasoning tokens their
// completion count leaves out; when those are as many as the cached
// tokens, the cache was added to the input a second time.
var inputHoldsCache = map[string]bool{
	"openai": true, "azure.ai.openai": true, "gcp.gemini": true, "gcp.gen_ai": true,
	"gcp.vertex_ai": true, "x_ai": true, "deepseek": true,
}

// outputWithoutReasoning are the providers whose APIs count the reasoning
// tokens apart from the output, and whose totals hold both: Gemini's
// (gcp.gemini, gcp.gen_ai, and on Vertex AI) and xAI's.
var outputWithoutReasoning = map[string]bool{
	"gcp.gemini": true, "gcp.gen_ai": true, "gcp.vertex_ai": true, "x_ai": true,
}

// sum adds token counts, nil when the sum passes the int64 range: counts
// are kept as sent, and bogus ones (near 2⁶³) must not wrap around to a
// plausible or negative sum; a sum that does not exist is no count.
func sum(counts ...int64) *int64 {
	var total int64
	for _, c := range counts {
		next := total + c
		if (c > 0 && next < total) || (c < 0 && next > total) {
			return nil
		}
		total = next
	}
	return &total
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// SpanColumns are the columns of genai_operations the span itself gives
// (its ids, time and service), written by the spans decoder; Columns
// follow them, from the Operation.
var SpanColumns = []schema.Column{
	{Name: "tenant_id", Type: schema.String},
	{Name: "trace_id", Type: schema.String},
	{Name: "span_id", Type: schema.String},
	{Name: "parent_span_id", Type: schema.String},
	{Name: "start_time", Type: schema.Timestamp},
	{Name: "duration_ms", Type: schema.Float64},
	{Name: "service_name", Type: schema.String},
	{Name: "span_name", Type: schema.String},
}

// SpanIdentity are the columns an operation shares with its span in
// otel_spans that name the span: verify checks that the span at an
// operation's coordinates is its own.
var SpanIdentity = []string{"tenant_id", "trace_id", "span_id"}

// Columns are the operation's columns, in the order of WriteValues.
var Columns = []schema.Column{
	{Name: "convention", Type: schema.String},
	{Name: "operation", Type: schema.String},
	{Name: "provider", Type: schema.String},
	{Name: "request_model", Type: schema.String},
	{Name: "response_model", Type: schema.String},
	{Name: "input_tokens", Type: schema.Int64},
	{Name: "output_tokens", Type: schema.Int64},
	{Name: "total_tokens", Type: schema.Int64},
	{Name: "cache_read_tokens", Type: schema.Int64},
	{Name: "cache_creation_tokens", Type: schema.Int64},
	{Name: "reasoning_tokens", Type: schema.Int64},
	{Name: "temperature", Type: schema.Float64},
	{Name: "max_tokens", Type: schema.Int64},
	{Name: "finish_reasons", Type: schema.JSON},
	{Name: "tool_name", Type: schema.String},
	{Name: "tool_call_id", Type: schema.String},
	{Name: "agent_name", Type: schema.String},
	{Name: "conversation_id", Type: schema.String},
	{Name: "user_id", Type: schema.String},
	{Name: "error_type", Type: schema.String},
	{Name: "status", Type: schema.String},
	{Name: "input_messages", Type: schema.JSON},
	{Name: "output_messages", Type: schema.JSON},
	{Name: "input_cost_usd", Type: schema.Decimal},
	{Name: "cache_read_cost_usd", Type: schema.Decimal},
	{Name: "cache_creation_cost_usd", Type: schema.Decimal},
	{Name: "output_cost_usd", Type: schema.Decimal},
	{Name: "total_cost_usd", Type: schema.Decimal},
	{Name: "price_id", Type: schema.String},
	{Name: "price_match", Type: schema.String},
}

// Table is genai_operations: one row per GenAI span, with its span's
// coordinates (so it is fenced and loaded exactly once with its span).
var Table = schema.Table{
	Name:    "genai_operations",
	Columns: append(append([]schema.Column{}, SpanColumns...), Columns...),
	Tenant:  "tenant_id",
	Time:    "start_time",
}

// ValueWriter takes an operation's values in the order of Columns, each
// by its type (Operation.WriteValues); none is boxed into an interface,
// which on the decoder's path cost an allocation per value.
type ValueWriter interface {
	Text(s string)    // "" is null
	Int(v *int64)     // nil is null
	Float(v *float64) // nil is null
	Texts(v []string) // a JSON array; nil is null
	JSON(v []byte)    // JSON text; nil is null
	// Cost is a dollar amount in pico-dollars (prices.Decimal formats
	// it), null when !ok.
	Cost(pico int64, ok bool)
}

// WriteValues hands the operation's column values to w in the order of
// Columns.
func (op *Operation) WriteValues(w ValueWriter) {
	var priceID, how string
	if op.Price != nil {
		priceID, how = op.Price.ID(), op.Price.How
	}
	for _, s := range [...]string{op.Convention, op.Operation, op.Provider, op.RequestModel, op.ResponseModel} {
		w.Text(s)
	}
	for _, v := range [...]*int64{op.InputTokens, op.OutputTokens, op.TotalTokens, op.CacheReadTokens, op.CacheCreationTokens, op.ReasoningTokens} {
		w.Int(v)
	}
	w.Float(op.Temperature)
	w.Int(op.MaxTokens)
	w.Texts(op.FinishReasons)
	for _, s := range [...]string{op.ToolName, op.ToolCallID, op.AgentName, op.ConversationID, op.UserID, op.ErrorType, op.Status} {
		w.Text(s)
	}
	w.JSON(op.InputMessages)
	w.JSON(op.OutputMessages)
	c := op.Cost
	for _, v := range [...]int64{c.Input, c.CacheRead, c.CacheWrite, c.Output, c.Total()} {
		w.Cost(v, op.Price != nil)
	}
	w.Text(priceID)
	w.Text(how)
}
