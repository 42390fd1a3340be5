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
	numColumns
)

// ColumnNames are the columns' names, by column.
var ColumnNames = [numColumns]string{
	"request_model", "response_model", "input_tokens", "output_tokens", "total_tokens",
	"cache_read_tokens", "cache_creation_tokens", "reasoning_tokens", "temperature", "max_tokens",
	"tool_call_id", "conversation_id", "user_id", "error_type", "provider",
}

// Where an attribute name comes from, for the mapping table.
const (
	srcOTel          = "OpenTelemetry GenAI semantic conventions"
	srcOTelOld       = "OpenTelemetry GenAI, deprecated"
	srcOpenInference = "OpenInference semantic conventions (spec/semantic_conventions.md)"
	srcTraceloop     = "Traceloop semantic conventions (opentelemetry-semantic-conventions-ai SpanAttributes)"
	srcClaudeCode    = "Claude Code monitoring docs (claude_code.* span attributes)"
)

// source is one attribute a column is read from.
type source struct {
	attr   string
	origin string
	// key, when set, reads this key of the attribute's JSON object
	// (OpenInference's llm.invocation_parameters).
	key string
}

// mapping is, for each column, the attributes it is read from, in order of
// precedence: current OpenTelemetry names, deprecated ones, OpenInference,
// Traceloop, Claude Code. The first present wins; a present value of the
// wrong type makes the column null (it does not fall through). Claude
// Code's names are generic ("model", "input_tokens") and are read only on
// claude_code.* spans.
var mapping = [numColumns][]source{
	colRequestModel: {
		{attr: "gen_ai.request.model", origin: srcOTel},
		{attr: "llm.model_name", origin: srcOpenInference},
		{attr: "embedding.model_name", origin: srcOpenInference},
		{attr: "model", origin: srcClaudeCode},
	},
	colResponseModel: {
		{attr: "gen_ai.response.model", origin: srcOTel},
		{attr: "llm.model_name", origin: srcOpenInference},
		{attr: "model", origin: srcClaudeCode},
	},
	colInputTokens: {
		{attr: "gen_ai.usage.input_tokens", origin: srcOTel},
		{attr: "gen_ai.usage.prompt_tokens", origin: srcOTelOld + "; Traceloop"},
		{attr: "llm.token_count.prompt", origin: srcOpenInference},
		{attr: "input_tokens", origin: srcClaudeCode + " (without cache: the cache tokens are added)"},
	},
	colOutputTokens: {
		{attr: "gen_ai.usage.output_tokens", origin: srcOTel},
		{attr: "gen_ai.usage.completion_tokens", origin: srcOTelOld + "; Traceloop"},
		{attr: "llm.token_count.completion", origin: srcOpenInference},
		{attr: "output_tokens", origin: srcClaudeCode},
	},
	colTotalTokens: {
		{attr: "gen_ai.usage.total_tokens", origin: srcTraceloop},
		{attr: "llm.token_count.total", origin: srcOpenInference},
		{attr: "llm.usage.total_tokens", origin: srcTraceloop},
	},
	colCacheReadTokens: {
		{attr: "gen_ai.usage.cache_read.input_tokens", origin: srcOTel},
		{attr: "gen_ai.usage.cache_read_input_tokens", origin: srcOTelOld + "; Traceloop"},
		{attr: "llm.token_count.prompt_details.cache_read", origin: srcOpenInference},
		{attr: "cache_read_tokens", origin: srcClaudeCode},
	},
	colCacheCreationTokens: {
		{attr: "gen_ai.usage.cache_creation.input_tokens", origin: srcOTel},
		{attr: "gen_ai.usage.cache_creation_input_tokens", origin: srcOTelOld + "; Traceloop"},
		{attr: "llm.token_count.prompt_details.cache_write", origin: srcOpenInference},
		{attr: "cache_creation_tokens", origin: srcClaudeCode},
	},
	colReasoningTokens: {
		{attr: "gen_ai.usage.reasoning.output_tokens", origin: srcOTel},
		{attr: "llm.token_count.completion_details.reasoning", origin: srcOpenInference},
		{attr: "gen_ai.usage.reasoning_tokens", origin: srcTraceloop},
	},
	colTemperature: {
		{attr: "gen_ai.request.temperature", origin: srcOTel + "; Traceloop"},
		{attr: "llm.invocation_parameters", key: "temperature", origin: srcOpenInference},
	},
	colMaxTokens: {
		{attr: "gen_ai.request.max_tokens", origin: srcOTel + "; Traceloop"},
		{attr: "llm.invocation_parameters", key: "max_tokens", origin: srcOpenInference},
		{attr: "llm.invocation_parameters", key: "max_completion_tokens", origin: srcOpenInference},
	},
	colToolCallID: {
		{attr: "gen_ai.tool.call.id", origin: srcOTel},
		{attr: "tool_call.id", origin: srcOpenInference},
	},
	colConversationID: {
		{attr: "gen_ai.conversation.id", origin: srcOTel},
		{attr: "session.id", origin: srcOpenInference + "; " + srcClaudeCode},
		{attr: "traceloop.association.properties.session_id", origin: srcTraceloop},
	},
	colUserID: {
		{attr: "user.id", origin: srcOTel + " (general user.id); " + srcOpenInference},
		{attr: "traceloop.association.properties.user_id", origin: srcTraceloop},
		{attr: "gen_ai.user", origin: srcTraceloop},
		{attr: "user.account_uuid", origin: srcClaudeCode},
	},
	colErrorType: {
		{attr: "error.type", origin: srcOTel},
		{attr: "error", origin: srcClaudeCode},
	},
	colProvider: {
		{attr: "gen_ai.provider.name", origin: srcOTel},
		{attr: "gen_ai.system", origin: srcOTelOld + "; Traceloop"},
		{attr: "llm.provider", origin: srcOpenInference},
		{attr: "llm.system", origin: srcOpenInference},
	},
}

// claudeOnly are the generic names read only on claude_code.* spans.
var claudeOnly = map[string]bool{
	"model": true, "input_tokens": true, "output_tokens": true, "cache_read_tokens": true,
	"cache_creation_tokens": true, "error": true, "user.account_uuid": true,
}

// reader reads columns from one span's attributes.
type reader struct {
	attrs  pcommon.Map
	stats  *Stats
	claude bool // a claude_code.* span
	params map[string]any
	parsed bool // params parsed (or found absent)
}

// first returns the first source of col the span has, and its value.
func (r *reader) first(col column) (source, pcommon.Value, bool) {
	for _, s := range mapping[col] {
		if claudeOnly[s.attr] && !r.claude {
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
			_ = d.Decode(&r.params) // not an object: no parameters
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

func (r *reader) invalid(col column) { r.stats.Invalid[col].Add(1) }

// str reads a string column; other scalar types are written as text.
func (r *reader) str(col column) string {
	_, v, ok := r.first(col)
	if !ok {
		return ""
	}
	switch v.Type() {
	case pcommon.ValueTypeStr, pcommon.ValueTypeInt, pcommon.ValueTypeBool, pcommon.ValueTypeDouble:
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
	claude := claudeOnly[s.attr]
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			r.invalid(col)
			return nil, claude
		}
		n = int64(f)
	case pcommon.ValueTypeStr:
		var err error
		if n, err = strconv.ParseInt(strings.TrimSpace(v.Str()), 10, 64); err != nil {
			r.invalid(col)
			return nil, claude
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
	claudeCodeSpans = map[string]string{
		"claude_code.llm_request": "chat", "claude_code.api_request": "chat", "claude_code.api_error": "chat",
		"claude_code.tool": "execute_tool", "claude_code.tool_result": "execute_tool",
		"claude_code.interaction": "invoke_agent",
	}
)

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
	"bedrock": "aws.bedrock", "aws": "aws.bedrock", "awsbedrock": "aws.bedrock",
	"xai": "x_ai", "x-ai": "x_ai", "grok": "x_ai",
	"mistralai": "mistral_ai", "mistral": "mistral_ai",
	"watsonx": "ibm.watsonx.ai", "ibm": "ibm.watsonx.ai",
}

func (r *reader) provider() string {
	p := strings.ToLower(strings.TrimSpace(r.str(colProvider)))
	if n, ok := providers[p]; ok {
		return n
	}
	return p
}

// entityOfKind is Traceloop's entity name when its span kind is kind.
func (r *reader) entityOfKind(kind string) string {
	if k, ok := r.attrs.Get("traceloop.span.kind"); ok && strings.EqualFold(k.AsString(), kind) {
		if n, ok := r.attrs.Get("traceloop.entity.name"); ok {
			return n.AsString()
		}
	}
	return ""
}

func (r *reader) toolName() string {
	for _, a := range []string{"gen_ai.tool.name", "tool.name"} {
		if v, ok := r.attrs.Get(a); ok {
			return v.AsString()
		}
	}
	if n := r.entityOfKind("tool"); n != "" {
		return n
	}
	if r.claude {
		if v, ok := r.attrs.Get("tool_name"); ok {
			return v.AsString()
		}
	}
	return ""
}

func (r *reader) agentName() string {
	for _, a := range []string{"gen_ai.agent.name", "agent.name"} {
		if v, ok := r.attrs.Get(a); ok {
			return v.AsString()
		}
	}
	return r.entityOfKind("agent")
}

// finishReasons reads gen_ai.response.finish_reasons (an array, or one
// string), else Traceloop's per-choice gen_ai.completion.N.finish_reason.
func (r *reader) finishReasons() []string {
	if v, ok := r.attrs.Get("gen_ai.response.finish_reasons"); ok {
		if v.Type() == pcommon.ValueTypeSlice {
			out := make([]string, 0, v.Slice().Len())
			for i := range v.Slice().Len() {
				out = append(out, v.Slice().At(i).AsString())
			}
			return out
		}
		return []string{v.AsString()}
	}
	var out []string
	for _, m := range r.indexed("gen_ai.completion.") {
		if reason, ok := m.fields["finish_reason"]; ok {
			out = append(out, reason.AsString())
		}
	}
	return out
}

// indexedItem is one item of a list flattened into attributes
// (prefix.N.field).
type indexedItem struct {
	index  int
	fields map[string]pcommon.Value
}

// indexed gathers prefix.N.field attributes into items by N.
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
		items[i].fields[field] = v
		return true
	})
	slices.SortFunc(items, func(a, b indexedItem) int { return a.index - b.index })
	return items
}

// messageSources are where each direction's messages are: one attribute
// holding them all (JSON, or an array), then a flattened list whose items
// have role and content fields under a field prefix.
type messageSource struct {
	whole      []string // attributes holding the whole list
	flat       []string // prefixes of flattened lists
	fieldInner string   // prefix of the role/content fields within an item
}

var (
	inputMessages = messageSource{
		whole: []string{"gen_ai.input.messages", "gen_ai.prompt"},
		flat:  []string{"llm.input_messages.", "gen_ai.prompt."}, fieldInner: "message.",
	}
	outputMessages = messageSource{
		whole: []string{"gen_ai.output.messages", "gen_ai.completion"},
		flat:  []string{"llm.output_messages.", "gen_ai.completion."}, fieldInner: "message.",
	}
)

// messages returns a direction's messages as a JSON array, nil if the span
// carries none.
func (r *reader) messages(src messageSource) []byte {
	for _, a := range src.whole {
		v, ok := r.attrs.Get(a)
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
		b, err := json.Marshal(v.AsRaw())
		if err == nil {
			return b
		}
	}
	for _, prefix := range src.flat {
		items := r.indexed(prefix)
		if len(items) == 0 {
			continue
		}
		out := make([]map[string]any, 0, len(items))
		for _, it := range items {
			msg := map[string]any{}
			for field, v := range it.fields {
				// OpenInference nests its fields under "message.";
				// Traceloop's are direct.
				name := strings.TrimPrefix(field, src.fieldInner)
				if name == "role" || name == "content" {
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
