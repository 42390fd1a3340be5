package genai

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// column is a genai_operations column read from attributes.
type column int

const (
	colRequestModel column = iota
	colResponseModel
	colInputTokens
	colOutputTokens
	colTotalTokens
	colCacheReadTokens
	colCacheCreationTokens
	colReasoningTokens
	colTemperature
	colMaxTokens
	colToolCallID
	colConversationID
	colUserID
	colErrorType
	colProvider
	colToolName
	colAgentName
	numColumns
)

// ColumnNames are the columns' names, by column.
var ColumnNames = [numColumns]string{
	"request_model", "response_model", "input_tokens", "output_tokens", "total_tokens",
	"cache_read_tokens", "cache_creation_tokens", "reasoning_tokens", "temperature", "max_tokens",
	"tool_call_id", "conversation_id", "user_id", "error_type", "provider", "tool_name", "agent_name",
}

// origin is the conventions that define an attribute name (a set).
type origin int

const (
	fromOTel origin = 1 << iota
	fromOTelDeprecated
	fromOpenInference
	fromTraceloop
	fromClaudeCode
	fromPydanticAI
	fromStrands
	fromVercel
)

// Conventions are the conventions in order of precedence, with where their
// attribute names are defined, for the README's tables.
var Conventions = []struct {
	Name, Source string
	from         origin
}{
	{"OpenTelemetry GenAI", "the semantic conventions for GenAI spans and the gen_ai.* attribute registry, opentelemetry.io/docs/specs/semconv/gen-ai", fromOTel},
	{"OpenTelemetry GenAI, deprecated names", "the same registry's deprecated attributes", fromOTelDeprecated},
	{"OpenInference", "Arize-ai/openinference, spec/semantic_conventions.md", fromOpenInference},
	{"Traceloop", "traceloop/openllmetry, opentelemetry-semantic-conventions-ai's SpanAttributes", fromTraceloop},
	{"Vercel AI SDK", "vercel/ai, its telemetry's ai.* attributes beside gen_ai.system, gen_ai.request.model and gen_ai.usage.* (its gen_ai.system names the provider and its API: see provider), and alone on its embedding calls", fromVercel},
	{"Strands Agents", "strands-agents/sdk-python, telemetry/tracer.py (Bedrock's usage as it comes: its input without the cache, its total with it)", fromStrands},
	{"Pydantic AI", "pydantic/pydantic-ai, RequestUsage.opentelemetry_attributes, whose usage details are gen_ai.usage.details.*", fromPydanticAI},
	{"Claude Code", "Claude Code's monitoring docs, claude_code.* spans; these generic names are read on those spans only", fromClaudeCode},
}

// source is one attribute a column is read from.
type source struct {
	attr string
	from origin
	// key, when set, reads this key of the attribute's JSON object
	// (OpenInference's llm.invocation_parameters).
	key string
	// kind, when set, reads the attribute only on spans whose
	// traceloop.span.kind is kind (Traceloop's entity name is the tool's
	// or agent's name on those).
	kind string
	// with, when set, reads the attribute only on spans that also have
	// the attribute with (any value).
	with string
	// holdsCache, when set, reads the attribute only on spans whose
	// provider's API counts the input with its cache (inputHoldsCache):
	// a cache count that is part of the input there, and may not be
	// elsewhere.
	holdsCache bool
}

// mapping is, for each column, the attributes it is read from, in order of
// precedence: current OpenTelemetry names, deprecated ones, OpenInference,
// Traceloop, Vercel AI SDK, Strands Agents, Pydantic AI, Claude Code. The first present wins; a present value of the
// wrong type makes the column null (it does not fall through). Claude
// Code's names are generic ("model", "input_tokens") and are read only on
// claude_code.* spans.
var mapping = [numColumns][]source{
	colRequestModel: {
		{attr: "gen_ai.request.model", from: fromOTel},
		{attr: "llm.model_name", from: fromOpenInference},
		{attr: "embedding.model_name", from: fromOpenInference},
		// Its embedding calls name their model here only (no gen_ai.*).
		{attr: "ai.model.id", from: fromVercel},
		{attr: "model", from: fromClaudeCode},
	},
	colResponseModel: {
		{attr: "gen_ai.response.model", from: fromOTel},
		{attr: "llm.model_name", from: fromOpenInference},
		{attr: "model", from: fromClaudeCode},
	},
	colInputTokens: {
		{attr: "gen_ai.usage.input_tokens", from: fromOTel},
		{attr: "gen_ai.usage.prompt_tokens", from: fromOTelDeprecated | fromTraceloop},
		{attr: "llm.token_count.prompt", from: fromOpenInference},
		// An embedding call's usage (EmbeddingModelUsage: tokens, all of
		// them input).
		{attr: "ai.usage.tokens", from: fromVercel},
		{attr: "input_tokens", from: fromClaudeCode},
	},
	colOutputTokens: {
		{attr: "gen_ai.usage.output_tokens", from: fromOTel},
		{attr: "gen_ai.usage.completion_tokens", from: fromOTelDeprecated | fromTraceloop},
		{attr: "llm.token_count.completion", from: fromOpenInference},
		{attr: "output_tokens", from: fromClaudeCode},
	},
	colTotalTokens: {
		{attr: "gen_ai.usage.total_tokens", from: fromTraceloop | fromStrands},
		{attr: "llm.token_count.total", from: fromOpenInference},
		{attr: "llm.usage.total_tokens", from: fromTraceloop},
		// The Vercel AI SDK's: a v5-specification provider's own total
		// (ai@5's streamText and streamObject spans), which for Gemini
		// holds the thoughts its outputTokens leaves out (@ai-sdk/google@2:
		// candidatesTokenCount, totalTokenCount); unread, they were left
		// out of the output and its cost. ai@6's is input + output.
		{attr: "ai.usage.totalTokens", from: fromVercel},
	},
	colCacheReadTokens: {
		{attr: "gen_ai.usage.cache_read.input_tokens", from: fromOTel},
		{attr: "gen_ai.usage.cache_read_input_tokens", from: fromOTelDeprecated | fromTraceloop | fromStrands},
		{attr: "llm.token_count.prompt_details.cache_read", from: fromOpenInference},
		// The Vercel AI SDK's (v6): its gen_ai.usage.input_tokens is
		// inputTokens.total, which holds the cache it tells only here;
		// unread, the cached input was priced as uncached. Only beside
		// noCacheTokens, which a provider of the v3 specification (whose
		// total holds the cache) writes: a v2 provider's usage, adapted
		// (as-language-model-v3.ts), has none, and its total is the
		// package's v2 inputTokens, without the cache for Anthropic's and
		// Bedrock's; read, its cache was taken out of an input that never
		// held it.
		{attr: "ai.usage.inputTokenDetails.cacheReadTokens", from: fromVercel, with: vercelNoCache},
		// Without noCacheTokens (a v2 provider's usage) and in its object
		// spans, which tell the cache reads in ai.usage.cachedInputTokens
		// alone (ai@6's stream-object.ts, packages/otel's
		// onObjectStepEnd), the input holds them only where the API counts
		// it so, in both specifications (OpenAI's prompt_tokens; Gemini's
		// prompt_token_count): there they are read, else the cached input
		// was priced as uncached; elsewhere (Anthropic's, Bedrock's v2
		// input) they stay unread, as above.
		{attr: "ai.usage.inputTokenDetails.cacheReadTokens", from: fromVercel, holdsCache: true},
		{attr: "ai.usage.cachedInputTokens", from: fromVercel, holdsCache: true},
		// Pydantic AI's releases before the semconv names (and beside
		// them since): read, the cached input was priced as uncached.
		{attr: "gen_ai.usage.details.cache_read_tokens", from: fromPydanticAI},
		{attr: "cache_read_tokens", from: fromClaudeCode},
	},
	colCacheCreationTokens: {
		{attr: "gen_ai.usage.cache_creation.input_tokens", from: fromOTel},
		{attr: "gen_ai.usage.cache_creation_input_tokens", from: fromOTelDeprecated | fromTraceloop},
		{attr: "gen_ai.usage.cache_write_input_tokens", from: fromStrands},
		{attr: "llm.token_count.prompt_details.cache_write", from: fromOpenInference},
		{attr: "ai.usage.inputTokenDetails.cacheWriteTokens", from: fromVercel, with: vercelNoCache},
		{attr: "gen_ai.usage.details.cache_write_tokens", from: fromPydanticAI},
		{attr: "cache_creation_tokens", from: fromClaudeCode},
	},
	colReasoningTokens: {
		{attr: "gen_ai.usage.reasoning.output_tokens", from: fromOTel},
		{attr: "llm.token_count.completion_details.reasoning", from: fromOpenInference},
		{attr: "gen_ai.usage.reasoning_tokens", from: fromTraceloop},
		{attr: "ai.usage.outputTokenDetails.reasoningTokens", from: fromVercel},
		{attr: "gen_ai.usage.details.reasoning_tokens", from: fromPydanticAI},
	},
	colTemperature: {
		{attr: "gen_ai.request.temperature", from: fromOTel | fromTraceloop},
		{attr: "llm.invocation_parameters", key: "temperature", from: fromOpenInference},
	},
	colMaxTokens: {
		{attr: "gen_ai.request.max_tokens", from: fromOTel | fromTraceloop},
		{attr: "llm.invocation_parameters", key: "max_tokens", from: fromOpenInference},
		{attr: "llm.invocation_parameters", key: "max_completion_tokens", from: fromOpenInference},
	},
	colToolCallID: {
		{attr: "gen_ai.tool.call.id", from: fromOTel},
		{attr: "tool_call.id", from: fromOpenInference},
	},
	colConversationID: {
		{attr: "gen_ai.conversation.id", from: fromOTel},
		{attr: "session.id", from: fromOpenInference | fromClaudeCode},
		{attr: "traceloop.association.properties.session_id", from: fromTraceloop},
	},
	colUserID: {
		{attr: "user.id", from: fromOTel | fromOpenInference},
		{attr: "traceloop.association.properties.user_id", from: fromTraceloop},
		{attr: "gen_ai.user", from: fromTraceloop},
		{attr: "user.account_uuid", from: fromClaudeCode},
	},
	colErrorType: {
		{attr: "error.type", from: fromOTel},
		{attr: "error", from: fromClaudeCode},
	},
	colToolName: {
		{attr: "gen_ai.tool.name", from: fromOTel},
		{attr: "tool.name", from: fromOpenInference},
		{attr: "traceloop.entity.name", kind: "tool", from: fromTraceloop},
		{attr: "tool_name", from: fromClaudeCode},
	},
	colAgentName: {
		{attr: "gen_ai.agent.name", from: fromOTel},
		{attr: "agent.name", from: fromOpenInference},
		{attr: "traceloop.entity.name", kind: "agent", from: fromTraceloop},
	},
	colProvider: {
		{attr: "gen_ai.provider.name", from: fromOTel},
		{attr: "gen_ai.system", from: fromOTelDeprecated | fromTraceloop},
		{attr: "llm.provider", from: fromOpenInference},
		{attr: "llm.system", from: fromOpenInference},
		// The same "<provider>.<api>" name as its gen_ai.system, which
		// its embedding calls lack ("openai.embedding").
		{attr: "ai.model.provider", from: fromVercel},
	},
}

// vercelNoCache is the Vercel AI SDK's uncached input count, written by a
// provider of the v3 specification only: its input total holds the cache.
const vercelNoCache = "ai.usage.inputTokenDetails.noCacheTokens"

// reader reads columns from one span's attributes.
type reader struct {
	attrs  pcommon.Map
	stats  *Stats
	bad    [numColumns]bool // columns whose value was invalid
	claude bool             // a claude_code.* span
	// holdsCache: the span's provider's API counts the input with its
	// cache (inputHoldsCache), for the sources read only there.
	holdsCache bool
	params     map[string]any
	parsed     bool // params parsed (or found absent)
}

// first returns the first source of col the span has, and its value.
func (r *reader) first(col column) (source, pcommon.Value, bool) {
	for _, s := range mapping[col] {
		if s.from == fromClaudeCode && !r.claude {
			continue
		}
		if s.kind != "" {
			if k, ok := r.attrs.Get("traceloop.span.kind"); !ok || !strings.EqualFold(k.AsString(), s.kind) {
				continue
			}
		}
		if s.with != "" {
			if _, ok := r.attrs.Get(s.with); !ok {
				continue
			}
		}
		if s.holdsCache && !r.holdsCache {
			continue
		}
		if s.key != "" {
			if v, ok := r.param(s.key); ok {
				return s, v, true
			}
			continue
		}
		if v, ok := r.attrs.Get(s.attr); ok {
			return s, v, true
		}
	}
	return source{}, pcommon.Value{}, false
}

// param reads a key of llm.invocation_parameters (a JSON object in a
// string), as a Value.
func (r *reader) param(key string) (pcommon.Value, bool) {
	if !r.parsed {
		r.parsed = true
		if v, ok := r.attrs.Get("llm.invocation_parameters"); ok && v.Type() == pcommon.ValueTypeStr {
			d := json.NewDecoder(strings.NewReader(v.Str()))
			d.UseNumber()
			var params map[string]any // not r.params: its address would move the reader to the heap
			_ = d.Decode(&params)     // not an object: no parameters
			r.params = params
		}
	}
	raw, ok := r.params[key]
	if !ok {
		return pcommon.Value{}, false
	}
	v := pcommon.NewValueEmpty()
	switch x := raw.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			v.SetInt(i)
		} else if f, err := x.Float64(); err == nil {
			v.SetDouble(f)
		}
	case string:
		v.SetStr(x)
	}
	return v, true
}

func (r *reader) invalid(col column) {
	r.stats.Invalid[col].Add(1)
	r.bad[col] = true
}

// str reads a string column; other scalar types are written as text,
// bytes as their base64 text: as otel_spans stores them, from which a
// rebuild reads them (read as invalid, the load's row differed from the
// rebuild's).
func (r *reader) str(col column) string {
	_, v, ok := r.first(col)
	if !ok {
		return ""
	}
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeBool, pcommon.ValueTypeDouble, pcommon.ValueTypeBytes:
		return v.AsString()
	}
	r.invalid(col)
	return ""
}

// intFrom reads an integer column: an int, a double with no fraction, or
// a string holding an integer. It also says whether the value came from a
// Claude Code attribute.
func (r *reader) intFrom(col column) (*int64, bool) {
	s, v, ok := r.first(col)
	if !ok {
		return nil, false
	}
	claude := s.from == fromClaudeCode
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		var ok bool
		if n, ok = wholeNumber(v.Double()); !ok {
			r.invalid(col)
			return nil, claude
		}
	case pcommon.ValueTypeStr:
		// A number in a string is read as that number would be: "1200.0"
		// as the double 1200.0 is, not made null (which priced the
		// operation as if it had no such tokens).
		s := strings.TrimSpace(v.Str())
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			var ok bool
			if n, ok = wholeNumber(f); ferr != nil || !ok {
				r.invalid(col)
				return nil, claude
			}
		}
	default:
		r.invalid(col)
		return nil, claude
	}
	if n < 0 {
		r.invalid(col)
		return nil, claude
	}
	return &n, claude
}

// wholeNumber is f as an integer count when it is one: no fraction, and
// within 2⁵³, past which a double no longer holds every integer (nor NaN
// or an infinity).
func wholeNumber(f float64) (int64, bool) {
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// float reads a number column: a double, an int or a numeric string.
func (r *reader) float(col column) *float64 {
	_, v, ok := r.first(col)
	if !ok {
		return nil
	}
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	case pcommon.ValueTypeStr:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(v.Str()), 64); err != nil {
			r.invalid(col)
			return nil
		}
	default:
		r.invalid(col)
		return nil
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		r.invalid(col)
		return nil
	}
	return &f
}

// operations maps each convention's kind of span to the operation names of
// gen_ai.operation.name.
var (
	openInferenceKinds = map[string]string{
		"LLM": "chat", "EMBEDDING": "embeddings", "TOOL": "execute_tool", "AGENT": "invoke_agent",
		"RETRIEVER": "retrieval", "RERANKER": "rerank", "CHAIN": "chain", "GUARDRAIL": "guardrail",
		"EVALUATOR": "evaluate", "PROMPT": "prompt",
	}
	traceloopRequestTypes = map[string]string{
		"chat": "chat", "completion": "text_completion", "embedding": "embeddings", "rerank": "rerank",
	}
	traceloopSpanKinds = map[string]string{
		"tool": "execute_tool", "agent": "invoke_agent", "workflow": "workflow", "task": "task",
	}
	// vercelOperations are the Vercel AI SDK's ai.operationId values of
	// its model-call spans: those with gen_ai.* attributes, and its
	// embedding calls, which have none (vercelEmbedCalls, the list that
	// marks them). It sets no gen_ai.operation.name, so they had no
	// operation.
	vercelOperations = named(map[string]string{
		"ai.generateText.doGenerate": "chat", "ai.streamText.doStream": "chat",
		"ai.generateObject.doGenerate": "chat", "ai.streamObject.doStream": "chat",
	}, vercelEmbedCalls, "embeddings")
	claudeCodeSpans = map[string]string{
		"claude_code.llm_request": "chat", "claude_code.api_request": "chat", "claude_code.api_error": "chat",
		"claude_code.tool": "execute_tool", "claude_code.tool_result": "execute_tool",
		"claude_code.interaction": "invoke_agent",
	}
)

// named adds each of keys to names as operation op.
func named(names map[string]string, keys []string, op string) map[string]string {
	for _, k := range keys {
		names[k] = op
	}
	return names
}

// operation is the operation's name, by the same precedence.
func (r *reader) operation(spanName string) string {
	if v, ok := r.attrs.Get("gen_ai.operation.name"); ok && v.AsString() != "" {
		return strings.ToLower(v.AsString())
	}
	if op := r.mapped("openinference.span.kind", openInferenceKinds, strings.ToUpper); op != "" {
		return op
	}
	if op := r.mapped("llm.request.type", traceloopRequestTypes, strings.ToLower); op != "" {
		return op
	}
	if op := r.mapped("traceloop.span.kind", traceloopSpanKinds, strings.ToLower); op != "" {
		return op
	}
	if v, ok := r.attrs.Get("ai.operationId"); ok {
		// Only its model calls: another of its ids (the whole
		// generateText around them) is no operation of this table.
		if op, ok := vercelOperations[v.AsString()]; ok {
			return op
		}
	}
	if op, ok := claudeCodeSpans[spanName]; ok {
		return op
	}
	if rest, ok := strings.CutPrefix(spanName, "claude_code."); ok {
		return rest
	}
	return ""
}

// mapped looks attr's value up in names (after fold); a value not in it
// is kept, lowercased.
func (r *reader) mapped(attr string, names map[string]string, fold func(string) string) string {
	v, ok := r.attrs.Get(attr)
	if !ok || v.AsString() == "" {
		return ""
	}
	if op, ok := names[fold(v.AsString())]; ok {
		return op
	}
	return strings.ToLower(v.AsString())
}

// providers normalises the conventions' provider and system values to
// gen_ai.provider.name's.
var providers = map[string]string{
	"az.ai.openai": "azure.ai.openai", "azure": "azure.ai.openai", "azure_openai": "azure.ai.openai",
	"az.ai.inference": "azure.ai.inference",
	"vertex_ai":       "gcp.vertex_ai", "vertexai": "gcp.vertex_ai", "vertex": "gcp.vertex_ai",
	"gemini": "gcp.gemini", "google": "gcp.gemini", "google_genai": "gcp.gemini", "googlegenai": "gcp.gemini",
	// Pydantic AI's Gemini providers (providers/google_gla.py, google_vertex.py;
	// from 2.0 google.py's "google" and google_cloud.py's "google-cloud").
	"google-gla": "gcp.gemini", "google-vertex": "gcp.vertex_ai", "google-cloud": "gcp.vertex_ai",
	"bedrock": "aws.bedrock", "aws": "aws.bedrock", "awsbedrock": "aws.bedrock",
	"xai": "x_ai", "x-ai": "x_ai", "grok": "x_ai",
	"mistralai": "mistral_ai", "mistral": "mistral_ai",
	"watsonx": "ibm.watsonx.ai", "ibm": "ibm.watsonx.ai",
	// No gen_ai.provider.name of its own: genai-prices' id. OpenLLMetry's
	// Together instrumentation says "TogetherAI".
	"togetherai": "together", "together_ai": "together", "together-ai": "together",
	// The Vercel AI SDK's provider names (its gen_ai.system), once their
	// API is cut off (vercelAPIs).
	"google.generative-ai": "gcp.gemini", "google.vertex": "gcp.vertex_ai",
	"amazon-bedrock": "aws.bedrock", "azure-openai": "azure.ai.openai",
	// Its Anthropic models on a cloud name the cloud, then the vendor
	// (@ai-sdk/amazon-bedrock/anthropic's "bedrock.anthropic.messages",
	// @ai-sdk/google-vertex/anthropic's "googleVertex.anthropic.messages",
	// before 2026-04-30 "vertex.anthropic.messages"): the cloud's.
	"bedrock.anthropic": "aws.bedrock", "googlevertex.anthropic": "gcp.vertex_ai",
	"vertex.anthropic": "gcp.vertex_ai", "bedrock-mantle": "aws.bedrock",
}

// vercelAPIs end the Vercel AI SDK's provider names: it sets gen_ai.system
// to its model's provider, "<provider>.<api>" (@ai-sdk/xai's "xai.chat",
// @ai-sdk/openai's "openai.responses", @ai-sdk/anthropic's
// "anthropic.messages"). The provider is the part before the API: read
// whole, "xai.chat" and "groq.chat" found no price (genai-prices knows
// x-ai and groq), and the provider column held the API too. Its
// embedding models name theirs so too (ai.model.provider), mostly
// "embedding", but @ai-sdk/azure's "azure.embeddings" and
// @ai-sdk/cohere's "cohere.textEmbedding" (lowercased here).
var vercelAPIs = []string{".chat", ".completion", ".responses", ".messages", ".embedding", ".embeddings", ".textembedding",
	".image", ".transcription", ".speech"}

func (r *reader) provider() string {
	p := strings.ToLower(strings.TrimSpace(r.str(colProvider)))
	if n, ok := providers[p]; ok {
		return n
	}
	if base := cutVercelAPI(p); base != p {
		if n, ok := providers[base]; ok {
			return n
		}
		return base
	}
	return p
}

// cutVercelAPI returns the Vercel AI SDK's provider name p without its API
// (vercelAPIs), p itself when it has none.
func cutVercelAPI(p string) string {
	for _, api := range vercelAPIs {
		if base, ok := strings.CutSuffix(p, api); ok && base != "" {
			return base
		}
	}
	return p
}

// anthropicOnCloud tells the Vercel AI SDK's Anthropic models on a cloud
// ("vertex.anthropic.messages", "googleVertex.anthropic.messages",
// "bedrock.anthropic.messages"): their provider is the cloud's, but
// @ai-sdk/anthropic's Messages model counts their tokens as Anthropic's
// API does, wherever it runs (the input without its cache, the output
// with its thinking), not as the cloud's own models do.
func (r *reader) anthropicOnCloud() bool {
	return strings.HasSuffix(cutVercelAPI(strings.ToLower(strings.TrimSpace(r.str(colProvider)))), ".anthropic")
}

// listSource is where a list column is read from: one attribute holding
// the whole list, or a list flattened into attributes (prefix.N.field).
type listSource struct {
	attr string // the attribute, or the prefix of a flattened list
	flat bool
	from origin
}

// finishReasonSources are where finish_reasons is read from, in order.
var finishReasonSources = []listSource{
	{attr: "gen_ai.response.finish_reasons", from: fromOTel},
	{attr: "gen_ai.completion.", flat: true, from: fromTraceloop}, // .N.finish_reason
}

// finishReasons reads the finish reasons: an array (or one string), or
// each choice's finish_reason.
func (r *reader) finishReasons() []string {
	for _, src := range finishReasonSources {
		if !src.flat {
			v, ok := r.attrs.Get(src.attr)
			if !ok {
				continue
			}
			if v.Type() != pcommon.ValueTypeSlice {
				return []string{v.AsString()}
			}
			out := make([]string, 0, v.Slice().Len())
			for i := range v.Slice().Len() {
				out = append(out, v.Slice().At(i).AsString())
			}
			return out
		}
		var out []string
		for _, m := range r.indexed(src.attr) {
			if reason, ok := m.fields["finish_reason"]; ok {
				out = append(out, reason.AsString())
			}
		}
		if out != nil {
			return out
		}
	}
	return nil
}

// indexedItem is one item of a list flattened into attributes
// (prefix.N.field).
type indexedItem struct {
	index  int
	fields map[string]pcommon.Value
}

// indexed gathers prefix.N.field attributes into items by N; a repeated
// key keeps its first value.
func (r *reader) indexed(prefix string) []indexedItem {
	var items []indexedItem
	r.attrs.Range(func(k string, v pcommon.Value) bool {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			return true
		}
		num, field, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			return true
		}
		i := slices.IndexFunc(items, func(it indexedItem) bool { return it.index == n })
		if i < 0 {
			items = append(items, indexedItem{index: n, fields: map[string]pcommon.Value{}})
			i = len(items) - 1
		}
		// A key the span repeats (OTLP forbids it; decoders keep both)
		// keeps its first value, as Get reads every other column and as
		// otel_spans stores it: a rebuild from the stored span must read
		// the same messages and finish reasons as the load did.
		if _, seen := items[i].fields[field]; !seen {
			items[i].fields[field] = v
		}
		return true
	})
	slices.SortFunc(items, func(a, b indexedItem) int { return a.index - b.index })
	return items
}

// Where each direction's messages are, in order: a flattened item's role
// and content are its fields role and content (Traceloop) or message.role
// and message.content (OpenInference).
var (
	inputMessages = []listSource{
		{attr: "gen_ai.input.messages", from: fromOTel},
		{attr: "gen_ai.prompt", from: fromOTelDeprecated},
		{attr: "llm.input_messages.", flat: true, from: fromOpenInference},
		{attr: "gen_ai.prompt.", flat: true, from: fromTraceloop},
	}
	outputMessages = []listSource{
		{attr: "gen_ai.output.messages", from: fromOTel},
		{attr: "gen_ai.completion", from: fromOTelDeprecated},
		{attr: "llm.output_messages.", flat: true, from: fromOpenInference},
		{attr: "gen_ai.completion.", flat: true, from: fromTraceloop},
	}
)

// messages returns a direction's messages as a JSON array, nil if the span
// carries none.
func (r *reader) messages(sources []listSource) []byte {
	for _, src := range sources {
		if !src.flat {
			v, ok := r.attrs.Get(src.attr)
			if !ok {
				continue
			}
			if v.Type() == pcommon.ValueTypeStr {
				if json.Valid([]byte(v.Str())) {
					return []byte(v.Str())
				}
				b, _ := json.Marshal([]map[string]string{{"content": v.Str()}})
				return b
			}
			if b, err := json.Marshal(v.AsRaw()); err == nil {
				return b
			}
			continue
		}
		items := r.indexed(src.attr)
		if len(items) == 0 {
			continue
		}
		out := make([]map[string]any, 0, len(items))
		for _, it := range items {
			msg := map[string]any{}
			for field, v := range it.fields {
				if name := strings.TrimPrefix(field, "message."); name == "role" || name == "content" {
					msg[name] = v.AsString()
				}
			}
			out = append(out, msg)
		}
		b, _ := json.Marshal(out)
		return b
	}
	return nil
}
