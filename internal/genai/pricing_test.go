package genai_test

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// Perplexity's sonar-deep-research prices reasoning tokens apart
// (genai-prices: output_mtok 8, output_reasoning_mtok 3). In genai-prices'
// unit registry (prices/units.yml) output_reasoning_tokens is a descendant
// of output_tokens, so calcPrice (packages/js/src/engine.ts with
// decompose.ts computeLeafValues) charges output_mtok on the output tokens
// less the reasoning ones, and output_reasoning_mtok on the reasoning
// ones. The span reports its reasoning tokens
// (gen_ai.usage.reasoning.output_tokens), and the README leaves out only
// prices whose usage spans do not report (audio, image, web search,
// one-hour cache writes).
func TestReasoningTokensPricedAtTheirOwnPrice(t *testing.T) {
	attrs := chatAttrs("perplexity", "sonar-deep-research", 1000, 1000)
	attrs.PutInt("gen_ai.usage.reasoning.output_tokens", 600)
	m := genai.NewMapper(prices.Embedded(), false)
	op, ok := m.Map(&genai.Span{Name: "chat sonar-deep-research", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	if !ok || op.Price == nil {
		t.Fatalf("not priced: %v %+v", ok, op)
	}
	// 400 output tokens at $8/M + 600 reasoning tokens at $3/M = $0.005;
	// 1000 input tokens at $2/M = $0.002.
	const wantOutput, wantTotal = 5_000_000_000, 7_000_000_000 // pico-dollars
	if op.Cost.Output != wantOutput || op.Cost.Total() != wantTotal {
		t.Errorf("output cost %s total %s (price %s), want output %s total %s: the reasoning tokens at their own price",
			prices.Decimal(op.Cost.Output), prices.Decimal(op.Cost.Total()), op.Price.ID(), prices.Decimal(wantOutput), prices.Decimal(wantTotal))
	}
}

// A bogus token count near the int64 range (the README: "tokens kept as
// sent", no cost, never wrapped around) must not make total_tokens wrap
// around to a negative sum: total_tokens is input + output only when that
// sum exists; a sum past int64 is no count (null), not a negative one.
func TestTotalTokensDoNotWrapAround(t *testing.T) {
	attrs := chatAttrs("openai", "gpt-4o", 1<<62, 1<<62)
	op, ok := genai.NewMapper(prices.Embedded(), false).Map(&genai.Span{Name: "chat gpt-4o", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	if !ok {
		t.Fatal("not read")
	}
	if op.TotalTokens != nil && *op.TotalTokens < 0 {
		t.Errorf("total_tokens %d: input 2^62 + output 2^62 wrapped around to a negative count", *op.TotalTokens)
	}
}

// Claude Code's input_tokens excludes the cache, which is added to it; a
// sum past int64 is no count either.
func TestClaudeCodeInputTokensDoNotWrapAround(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("model", "claude-sonnet-4-5")
	attrs.PutInt("input_tokens", 1<<62)
	attrs.PutInt("cache_read_tokens", 1<<62)
	attrs.PutInt("output_tokens", 10)
	op, ok := genai.NewMapper(prices.Embedded(), false).Map(&genai.Span{Name: "claude_code.llm_request", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	if !ok {
		t.Fatal("not read")
	}
	if op.InputTokens != nil || op.TotalTokens != nil {
		t.Errorf("input_tokens %v total_tokens %v, want null: 2^62 + 2^62 cache reads wrap around", op.InputTokens, op.TotalTokens)
	}
}

// A token count sent as a string holding a number is read as that number
// would be (the README: numbers in strings are read): "1200.0" is 1200, as
// the double 1200.0 is. Before, a string went through ParseInt alone, so
// "1200.0" made input_tokens null and the operation was priced as if it
// had no input: its input cost 0, its total cost short by the input's.
func TestTokenCountInAStringIsReadAsItsNumber(t *testing.T) {
	cases := []struct {
		input string
		want  int64 // -1: null
	}{
		{"1200", 1200}, {" 1200 ", 1200}, {"1200.0", 1200}, {"1.2e3", 1200},
		{"12.5", -1}, {"abc", -1}, {"NaN", -1}, {"Inf", -1}, {"-5", -1}, {"-5.0", -1},
		{"1e300", -1}, // past 2^53, as a double there is
	}
	for _, c := range cases {
		attrs := pcommon.NewMap()
		attrs.PutStr("gen_ai.operation.name", "chat")
		attrs.PutStr("gen_ai.provider.name", "openai")
		attrs.PutStr("gen_ai.request.model", "gpt-4o")
		attrs.PutStr("gen_ai.usage.input_tokens", c.input)
		attrs.PutInt("gen_ai.usage.output_tokens", 100)
		m := genai.NewMapper(prices.Embedded(), false)
		op, ok := m.Map(&genai.Span{Name: "chat gpt-4o", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if !ok {
			t.Fatalf("%q: not an operation", c.input)
		}
		invalid := m.Stats().Invalid[slices.Index(genai.ColumnNames[:], "input_tokens")].Load()
		if c.want < 0 {
			// Its cost is unknown: priced without its input, it was too low.
			if op.InputTokens != nil || invalid != 1 || op.Price != nil {
				t.Errorf("%q: input_tokens %v (%d invalid, priced %v), want null, counted invalid and no cost", c.input, deref(op.InputTokens), invalid, op.Price != nil)
			}
			continue
		}
		// gpt-4o: $2.50 per million input tokens.
		if op.InputTokens == nil || *op.InputTokens != c.want || invalid != 0 || op.Cost.Input != c.want*2_500_000 {
			t.Errorf("%q: input_tokens %v (%d invalid), input cost %s; want %d costing %s",
				c.input, deref(op.InputTokens), invalid, prices.Decimal(op.Cost.Input), c.want, prices.Decimal(c.want*2_500_000))
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A span without a start (OTLP's 0, read as the epoch) is priced at the
// prices of now, as genai-prices prices a call given no timestamp
// (calcPrice's timestamp defaults to the current time); at the epoch it
// took a model's first price (claude-sonnet-4-6 changed on 2026-03-13).
func TestSpanWithoutStartIsPricedAtTodaysPrice(t *testing.T) {
	attrs := chatAttrs("anthropic", "claude-sonnet-4-6", 300_000, 1000)
	m := genai.NewMapper(prices.Embedded(), false)
	cost := func(start time.Time) int64 {
		t.Helper()
		op, ok := m.Map(&genai.Span{Name: "chat", Attributes: attrs, Start: start})
		if !ok || op.Price == nil {
			t.Fatalf("not priced at %s: %v %+v", start, ok, op)
		}
		return op.Cost.Total()
	}
	if then, now := cost(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)), cost(time.Now()); then == now {
		t.Fatalf("the same cost %s before and after the price's start date: pick a model whose price changed", prices.Decimal(now))
	}
	if got, want := cost(time.Unix(0, 0).UTC()), cost(time.Now()); got != want {
		t.Errorf("without a start: %s, want today's %s", prices.Decimal(got), prices.Decimal(want))
	}
}

// chatAttrs are the attributes of a chat span of the current conventions:
// provider, model and token counts.
func chatAttrs(provider, model string, input, output int64) pcommon.Map {
	attrs := pcommon.NewMap()
	attrs.PutStr("gen_ai.operation.name", "chat")
	attrs.PutStr("gen_ai.provider.name", provider)
	attrs.PutStr("gen_ai.request.model", model)
	attrs.PutInt("gen_ai.usage.input_tokens", input)
	attrs.PutInt("gen_ai.usage.output_tokens", output)
	return attrs
}

// OpenLLMetry's Together instrumentation names its system "TogetherAI"
// (opentelemetry-instrumentation-together, __init__.py: GEN_AI_SYSTEM),
// which genai-prices' provider_match for Together (equals together-ai or
// together_ai) does not take: its spans went unpriced. It is Together's.
func TestTogetherAISystemIsPricedAsTogether(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	cost := func(system string) genai.Operation {
		t.Helper()
		attrs := chatAttrs("", "Gryphe/MythoMax-L2-13b", 1_000_000, 0)
		attrs.Remove("gen_ai.provider.name")
		attrs.PutStr("gen_ai.system", system)
		op, ok := m.Map(&genai.Span{Name: "together.chat", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if !ok {
			t.Fatalf("%s: not read", system)
		}
		return op
	}
	want := cost("together")
	if want.Price == nil {
		t.Fatal("the system together is not priced: pick a model of Together's")
	}
	if got := cost("TogetherAI"); got.Price == nil || got.Cost.Total() != want.Cost.Total() || got.Provider != want.Provider {
		t.Errorf("TogetherAI: provider %q price %v, want together's %q at %s", got.Provider, got.Price, want.Provider, prices.Decimal(want.Cost.Total()))
	}
}

// The Vercel AI SDK sets gen_ai.system to its model's provider, which it
// names "<provider>.<api>" (generate-text.ts: 'gen_ai.system':
// model.provider; @ai-sdk/xai: provider 'xai.chat', @ai-sdk/groq:
// 'groq.chat', @ai-sdk/openai: 'openai.chat', 'openai.responses';
// @ai-sdk/deepseek: 'deepseek.chat'). Its ai.generateText.doGenerate span
// is the model call: its provider is the part before the API, priced as
// the same call with that provider would be.
func TestVercelAISDKProviderIsTheProviderOfItsAPI(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	read := func(system, model string) genai.Operation {
		t.Helper()
		attrs := pcommon.NewMap()
		attrs.PutStr("ai.model.provider", system)
		attrs.PutStr("ai.model.id", model)
		attrs.PutStr("gen_ai.system", system)
		attrs.PutStr("gen_ai.request.model", model)
		attrs.PutStr("gen_ai.response.model", model)
		attrs.PutInt("gen_ai.usage.input_tokens", 1_000_000)
		attrs.PutInt("gen_ai.usage.output_tokens", 100_000)
		attrs.PutInt("ai.usage.promptTokens", 1_000_000)
		attrs.PutInt("ai.usage.completionTokens", 100_000)
		op, ok := m.Map(&genai.Span{Name: "ai.generateText.doGenerate", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if !ok {
			t.Fatalf("%s: not read", system)
		}
		return op
	}
	for _, c := range []struct{ vercel, provider, model string }{
		{"xai.chat", "x_ai", "grok-2-1212"},
		{"groq.chat", "groq", "llama-3.3-70b-versatile"},
		{"deepseek.chat", "deepseek", "deepseek-chat"},
		{"openai.chat", "openai", "gpt-4o"},
		{"openai.responses", "openai", "gpt-4o"},
		{"anthropic.messages", "anthropic", "claude-3-5-sonnet-20241022"},
		{"mistral.chat", "mistral_ai", "mistral-large-latest"},
	} {
		want := read(c.provider, c.model)
		if want.Price == nil {
			t.Fatalf("%s %s is not priced: pick a model the data has", c.provider, c.model)
		}
		got := read(c.vercel, c.model)
		if got.Provider != c.provider || got.Price == nil || got.Cost.Total() != want.Cost.Total() {
			price := "none"
			if got.Price != nil {
				price = got.Price.ID() + " " + prices.Decimal(got.Cost.Total())
			}
			t.Errorf("gen_ai.system %q: provider %q price %s, want %q priced %s %s", c.vercel, got.Provider, price, c.provider, want.Price.ID(), prices.Decimal(want.Cost.Total()))
		}
	}
}

// Pydantic AI (whose authors publish genai-prices) puts a request's usage
// on its chat span with RequestUsage.opentelemetry_attributes: input and
// output as gen_ai.usage.input_tokens / output_tokens, everything else as
// gen_ai.usage.details.<field> — cache reads and writes and reasoning
// tokens among them (pydantic-ai's tests/models/test_instrumented.py, the
// "chat gpt-4o" span; later releases add the semconv cache names beside
// them, and one reports operation.cost 0.002225 for these counts). Its
// input_tokens includes the cache, as the conventions' does. gpt-4o:
// $2.5/M input, $1.25/M cache reads, no cache-write price (those are
// input), $10/M output: 80 × 2.5 + 20 × 1.25 + 200 × 10 = $0.002225.
func TestPydanticAIUsageDetailsArePriced(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("gen_ai.operation.name", "chat")
	attrs.PutStr("gen_ai.system", "openai")
	attrs.PutStr("gen_ai.request.model", "gpt-4o")
	attrs.PutStr("gen_ai.response.model", "gpt-4o-2024-11-20")
	attrs.PutStr("logfire.msg", "chat gpt-4o")
	attrs.PutInt("gen_ai.usage.details.reasoning_tokens", 30)
	attrs.PutInt("gen_ai.usage.details.cache_write_tokens", 10)
	attrs.PutInt("gen_ai.usage.details.cache_read_tokens", 20)
	attrs.PutInt("gen_ai.usage.input_tokens", 100)
	attrs.PutInt("gen_ai.usage.output_tokens", 200)
	op, ok := genai.NewMapper(prices.Embedded(), false).Map(&genai.Span{Name: "chat gpt-4o", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	if !ok || op.Price == nil {
		t.Fatalf("not priced: %v %+v", ok, op)
	}
	if deref(op.CacheReadTokens) != int64(20) || deref(op.CacheCreationTokens) != int64(10) || deref(op.ReasoningTokens) != int64(30) {
		t.Errorf("cache read %v, cache creation %v, reasoning %v tokens; want 20, 10, 30 (gen_ai.usage.details.*)",
			deref(op.CacheReadTokens), deref(op.CacheCreationTokens), deref(op.ReasoningTokens))
	}
	const want = 2_225_000_000 // pico-dollars
	if op.Cost.Total() != want {
		t.Errorf("cost %s (input %s, cache reads %s), want %s: the 20 cached tokens at the cache-read price",
			prices.Decimal(op.Cost.Total()), prices.Decimal(op.Cost.Input), prices.Decimal(op.Cost.CacheRead), prices.Decimal(want))
	}
}

// Strands Agents (strands-agents/sdk-python, telemetry/tracer.py:
// end_model_invoke_span) puts Bedrock's Converse usage on its chat span as
// it comes: gen_ai.usage.input_tokens is usage.inputTokens, which on
// Bedrock excludes the cache, the cache reads and writes are
// gen_ai.usage.cache_read_input_tokens and cache_write_input_tokens, and
// gen_ai.usage.total_tokens is Bedrock's totalTokens, the sum of all four
// (OpenInference's Strands processor test: 4299 + 631 + 35574 + 17787 =
// 58291, "Prompt aggregate includes cached tokens so prompt + completion
// == total"). input_tokens is the input with its cache (README): 57660.
func TestInputWithoutItsCacheIsToldByTheSpansTotal(t *testing.T) {
	attrs := func(provider string) pcommon.Map {
		a := pcommon.NewMap()
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.system", provider)
		a.PutStr("gen_ai.request.model", "us.anthropic.claude-sonnet-4-20250514-v1:0")
		a.PutInt("gen_ai.usage.prompt_tokens", 4299)
		a.PutInt("gen_ai.usage.input_tokens", 4299)
		a.PutInt("gen_ai.usage.completion_tokens", 631)
		a.PutInt("gen_ai.usage.output_tokens", 631)
		a.PutInt("gen_ai.usage.total_tokens", 58291)
		a.PutInt("gen_ai.usage.cache_read_input_tokens", 35574)
		a.PutInt("gen_ai.usage.cache_write_input_tokens", 17787)
		return a
	}
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	op, ok := m.Map(&genai.Span{Name: "chat", Attributes: attrs("strands-agents"), Start: start})
	if !ok {
		t.Fatal("not read")
	}
	if deref(op.InputTokens) != int64(57660) || deref(op.TotalTokens) != int64(58291) ||
		deref(op.CacheReadTokens) != int64(35574) || deref(op.CacheCreationTokens) != int64(17787) {
		t.Errorf("input %v total %v cache read %v cache creation %v, want 57660 58291 35574 17787",
			deref(op.InputTokens), deref(op.TotalTokens), deref(op.CacheReadTokens), deref(op.CacheCreationTokens))
	}
	// The same counts from Bedrock itself are priced (claude-sonnet-4 on
	// Bedrock: $3/M input, $0.30/M cache reads, $3.75/M cache writes,
	// $15/M output): 4299 × 3 + 35574 × 0.3 + 17787 × 3.75 + 631 × 15 =
	// $0.09973545; before, the cache reads past the input left it unpriced.
	op, _ = m.Map(&genai.Span{Name: "chat", Attributes: attrs("aws.bedrock"), Start: start})
	if op.Price == nil || op.Cost.Total() != 99_735_450_000 {
		var cost string
		if op.Price != nil {
			cost = prices.Decimal(op.Cost.Total())
		}
		t.Errorf("Bedrock: price %v cost %q, want 0.099735450000", op.Price, cost)
	}
}

// The Vercel AI SDK's model-call spans (ai.generateText.doGenerate,
// ai.streamText.doStream, ai.generateObject.doGenerate,
// ai.streamObject.doStream) carry gen_ai.system, gen_ai.request.model,
// gen_ai.response.* and gen_ai.usage.* but no gen_ai.operation.name: the
// SDK names the operation in ai.operationId (telemetry's
// assembleOperationName: operation.name and ai.operationId). Each is one
// chat call to the model; its operation is chat, not null.
func TestVercelAISDKModelCallIsAChat(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	for _, id := range []string{"ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate", "ai.streamObject.doStream"} {
		attrs := pcommon.NewMap()
		attrs.PutStr("operation.name", id+" my-function")
		attrs.PutStr("ai.operationId", id)
		attrs.PutStr("ai.telemetry.functionId", "my-function")
		attrs.PutStr("ai.model.provider", "openai.chat")
		attrs.PutStr("ai.model.id", "gpt-4o-mini")
		attrs.PutStr("gen_ai.system", "openai.chat")
		attrs.PutStr("gen_ai.request.model", "gpt-4o-mini")
		attrs.PutStr("ai.response.finishReason", "stop")
		attrs.PutInt("ai.usage.promptTokens", 10)
		attrs.PutInt("ai.usage.completionTokens", 20)
		attrs.PutEmptySlice("gen_ai.response.finish_reasons").AppendEmpty().SetStr("stop")
		attrs.PutStr("gen_ai.response.model", "gpt-4o-mini-2024-07-18")
		attrs.PutInt("gen_ai.usage.input_tokens", 10)
		attrs.PutInt("gen_ai.usage.output_tokens", 20)
		op, ok := m.Map(&genai.Span{Name: id, Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if !ok {
			t.Fatalf("%s: not read", id)
		}
		if op.Operation != "chat" {
			t.Errorf("%s: operation %q, want chat", id, op.Operation)
		}
	}
}

// OpenLLMetry's google-generativeai instrumentation (span_utils.py,
// set_model_response_attributes) puts Gemini's usage_metadata on its span
// as it comes: gen_ai.usage.input_tokens is prompt_token_count (which
// holds the cached tokens, as the conventions' input does),
// gen_ai.usage.output_tokens is candidates_token_count (without the
// thoughts), gen_ai.usage.total_tokens is total_token_count (prompt +
// candidates + thoughts) and gen_ai.usage.cache_read_input_tokens is
// cached_content_token_count. When the thoughts happen to be as many as
// the cached tokens (1024 here), the total is input + output + cache
// reads, and the input must not have its cache added a second time:
// Gemini's prompt count already holds it.
func TestCacheNotAddedTwiceWhenThoughtsEqualTheCache(t *testing.T) {
	attrs := func(total bool) pcommon.Map {
		a := pcommon.NewMap()
		a.PutStr("gen_ai.provider.name", "gcp.gen_ai")
		a.PutStr("gen_ai.operation.name", "generate_content")
		a.PutStr("gen_ai.request.model", "gemini-2.5-flash")
		a.PutStr("gen_ai.response.model", "gemini-2.5-flash")
		if total {
			a.PutInt("gen_ai.usage.total_tokens", 3124)
		}
		a.PutInt("gen_ai.usage.output_tokens", 100)
		a.PutInt("gen_ai.usage.input_tokens", 2000)
		a.PutInt("gen_ai.usage.cache_read_input_tokens", 1024)
		return a
	}
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	op, ok := m.Map(&genai.Span{Name: "gemini.generate_content", Attributes: attrs(true), Start: start})
	if !ok {
		t.Fatal("not read")
	}
	if deref(op.InputTokens) != int64(2000) || deref(op.TotalTokens) != int64(3124) {
		t.Errorf("input %v total %v, want 2000 3124: Gemini's prompt count holds its cache", deref(op.InputTokens), deref(op.TotalTokens))
	}
	// The input costs what it costs without the total; the total's 1024
	// thoughts are output (TestGeminiThoughtsLeftOutOfTheOutputAreOutput).
	without, _ := m.Map(&genai.Span{Name: "gemini.generate_content", Attributes: attrs(false), Start: start})
	if op.Price == nil || without.Price == nil || op.Cost.Input != without.Cost.Input || op.Cost.CacheRead != without.Cost.CacheRead {
		t.Errorf("cost %+v, want the input's and cache reads' cost without the total: %+v", op.Cost, without.Cost)
	}
}

// The Vercel AI SDK's Anthropic models on Bedrock and on Vertex AI
// (@ai-sdk/amazon-bedrock/anthropic: "bedrock.anthropic.messages";
// @ai-sdk/google-vertex/anthropic: "googleVertex.anthropic.messages",
// "vertex.anthropic.messages" before 2026-04-30) name the cloud before
// the API's vendor. Cut of their API they are the cloud's provider, as
// "amazon-bedrock" and "google.vertex" are: "bedrock.anthropic" left the
// Bedrock model ids (anthropic.claude-sonnet-4-20250514-v1:0) unpriced.
func TestVercelAISDKCloudAnthropicProviders(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	for _, c := range []struct{ system, model, want string }{
		{"bedrock.anthropic.messages", "us.anthropic.claude-sonnet-4-20250514-v1:0", "aws.bedrock"},
		{"bedrock.anthropic.messages", "anthropic.claude-sonnet-4-20250514-v1:0", "aws.bedrock"},
		{"googleVertex.anthropic.messages", "claude-sonnet-4@20250514", "gcp.vertex_ai"},
		{"vertex.anthropic.messages", "claude-sonnet-4@20250514", "gcp.vertex_ai"},
	} {
		attrs := pcommon.NewMap()
		attrs.PutStr("ai.operationId", "ai.generateText.doGenerate")
		attrs.PutStr("gen_ai.system", c.system)
		attrs.PutStr("gen_ai.request.model", c.model)
		attrs.PutInt("gen_ai.usage.input_tokens", 1000)
		attrs.PutInt("gen_ai.usage.output_tokens", 100)
		op, _ := m.Map(&genai.Span{Name: "ai.generateText.doGenerate", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if op.Provider != c.want || op.Price == nil {
			t.Errorf("%s %s: provider %q price %v, want %s, priced", c.system, c.model, op.Provider, op.Price, c.want)
		}
	}
}

// A cache larger than the input count it is said to be part of cannot be
// part of it: the input was counted without its cache (Bedrock's and
// Anthropic's APIs count it so; Pydantic AI v1.31.0-v1.39.0 passed
// Bedrock's on under its gen_ai.usage.details names, the OpenTelemetry
// names with an Anthropic instrumentation that passes the API's on) and
// the cache is added to it. Taken as part of it, the cached input came
// out negative and the operation went unpriced.
func TestCacheLargerThanItsInputIsNotPartOfIt(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, system, model, read, write string
	}{
		{"pydantic ai on bedrock", "bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0", "gen_ai.usage.details.cache_read_tokens", "gen_ai.usage.details.cache_write_tokens"},
		{"semantic conventions, anthropic", "anthropic", "claude-sonnet-4-20250514", "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens"},
	} {
		attrs := pcommon.NewMap()
		attrs.PutStr("gen_ai.operation.name", "chat")
		attrs.PutStr("gen_ai.system", c.system)
		attrs.PutStr("gen_ai.request.model", c.model)
		attrs.PutInt("gen_ai.usage.input_tokens", 4299)
		attrs.PutInt("gen_ai.usage.output_tokens", 631)
		attrs.PutInt(c.read, 35574)
		attrs.PutInt(c.write, 17787)
		op, _ := m.Map(&genai.Span{Name: "chat " + c.model, Attributes: attrs, Start: start})
		// 4299 × 3 + 35574 × 0.3 + 17787 × 3.75 + 631 × 15 dollars a
		// million tokens, in pico-dollars.
		const want = 99_735_450_000
		if op.Price == nil || op.Cost.Total() != want || deref(op.InputTokens) != int64(4299+35574+17787) {
			cost := "none"
			if op.Price != nil {
				cost = prices.Decimal(op.Cost.Total())
			}
			t.Errorf("%s: input_tokens %v cost %s, want %d and %s", c.name, deref(op.InputTokens), cost, 4299+35574+17787, prices.Decimal(want))
		}
	}
}

// Pydantic AI's Bedrock model from v1.31.0 (prompt caching for Bedrock)
// to v1.39.0 put Converse's usage in its RequestUsage as it came
// (models/bedrock.py: input_tokens=usage['inputTokens'], which on Bedrock
// excludes the cache; v1.39.1 "Fix input_tokens calculation for Bedrock
// model" adds it), and those releases name the cache only
// gen_ai.usage.details.cache_read_tokens / cache_write_tokens (the semconv
// names came in v1.78.0). Only the span's instrumentation scope tells the
// releases apart (pydantic-ai and its version, models/instrumented.py).
// Read as part of the input, the cache was taken out of an input that
// never held it: too cheap. Later releases' input holds it.
func TestPydanticAIBedrockCacheBeforeV1_39_1(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		scope, version     string
		input, read, write int64
		wantInput          int64
		want               int64 // pico-dollars
	}{
		// 4299 × 3 + 35574 × 0.3 + 17787 × 3.75 + 631 × 15.
		{"pydantic-ai", "1.31.0", 4299, 35574, 17787, 57660, 99_735_450_000},
		// 5000 × 3 + 2000 × 0.3 + 631 × 15.
		{"pydantic-ai", "1.39.0", 5000, 2000, 0, 7000, 25_065_000_000},
		{"pydantic-ai", "1.35.2", 5000, 2000, 0, 7000, 25_065_000_000},
		// The input holds its cache: 3000 × 3 + 2000 × 0.3 + 631 × 15.
		{"pydantic-ai", "1.39.1", 5000, 2000, 0, 5000, 19_065_000_000},
		{"pydantic-ai", "1.30.0", 5000, 2000, 0, 5000, 19_065_000_000},
		{"pydantic-ai", "1.40.0b1", 5000, 2000, 0, 5000, 19_065_000_000},
		{"another-library", "1.35.0", 5000, 2000, 0, 5000, 19_065_000_000},
		{"", "", 5000, 2000, 0, 5000, 19_065_000_000},
	} {
		attrs := pcommon.NewMap()
		attrs.PutStr("gen_ai.operation.name", "chat")
		attrs.PutStr("gen_ai.system", "bedrock")
		attrs.PutStr("gen_ai.request.model", "us.anthropic.claude-sonnet-4-20250514-v1:0")
		attrs.PutStr("gen_ai.response.model", "us.anthropic.claude-sonnet-4-20250514-v1:0")
		attrs.PutInt("gen_ai.usage.input_tokens", c.input)
		attrs.PutInt("gen_ai.usage.output_tokens", 631)
		attrs.PutInt("gen_ai.usage.details.cache_read_tokens", c.read)
		if c.write > 0 {
			attrs.PutInt("gen_ai.usage.details.cache_write_tokens", c.write)
		}
		op, _ := m.Map(&genai.Span{
			Name: "chat us.anthropic.claude-sonnet-4-20250514-v1:0", Attributes: attrs, Start: start,
			ScopeName: c.scope, ScopeVersion: c.version,
		})
		var cost string
		if op.Price != nil {
			cost = prices.Decimal(op.Cost.Total())
		}
		if op.Price == nil || op.Cost.Total() != c.want || deref(op.InputTokens) != c.wantInput {
			t.Errorf("%s %s, input %d cache %d+%d: input_tokens %v cost %q, want %d and %s",
				c.scope, c.version, c.input, c.read, c.write, deref(op.InputTokens), cost, c.wantInput, prices.Decimal(c.want))
		}
	}
}
