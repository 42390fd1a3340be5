package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// The Vercel AI SDK (v6) writes a model call's usage on its
// ai.generateText.doGenerate span (vercel/ai,
// packages/ai/src/generate-text/generate-text.ts): gen_ai.usage.input_tokens
// is inputTokens.total, which holds the cache
// (packages/anthropic/src/convert-anthropic-messages-usage.ts: total =
// input_tokens + cache_creation_input_tokens + cache_read_input_tokens;
// packages/provider/src/language-model/v3/language-model-v3-usage.ts),
// and the cache is told only in its own names:
// ai.usage.inputTokenDetails.cacheReadTokens (also
// ai.usage.cachedInputTokens), ai.usage.inputTokenDetails.cacheWriteTokens,
// and the reasoning in ai.usage.outputTokenDetails.reasoningTokens (also
// ai.usage.reasoningTokens). The operation must cost what the same call
// written in the conventions' names costs: cache reads at their price,
// not the whole input at the uncached input price.
func TestVercelAISDKCacheAndReasoningTokensArePriced(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const model = "claude-sonnet-4-5"

	v := pcommon.NewMap()
	v.PutStr("operation.name", "ai.generateText.doGenerate")
	v.PutStr("ai.operationId", "ai.generateText.doGenerate")
	v.PutStr("ai.model.provider", "anthropic.messages")
	v.PutStr("ai.model.id", model)
	v.PutStr("gen_ai.system", "anthropic.messages")
	v.PutStr("gen_ai.request.model", model)
	v.PutStr("gen_ai.response.model", model)
	v.PutInt("ai.usage.inputTokens", 10_000)
	v.PutInt("ai.usage.inputTokenDetails.noCacheTokens", 1_000)
	v.PutInt("ai.usage.inputTokenDetails.cacheReadTokens", 8_000)
	v.PutInt("ai.usage.inputTokenDetails.cacheWriteTokens", 1_000)
	v.PutInt("ai.usage.outputTokens", 500)
	v.PutInt("ai.usage.outputTokenDetails.reasoningTokens", 200)
	v.PutInt("ai.usage.totalTokens", 10_500)
	v.PutInt("ai.usage.reasoningTokens", 200)
	v.PutInt("ai.usage.cachedInputTokens", 8_000)
	v.PutInt("gen_ai.usage.input_tokens", 10_000)
	v.PutInt("gen_ai.usage.output_tokens", 500)
	got, ok := m.Map(&genai.Span{Name: "ai.generateText.doGenerate", Attributes: v, Start: start})
	if !ok {
		t.Fatal("not read")
	}

	o := chatAttrs("anthropic", model, 10_000, 500)
	o.PutInt("gen_ai.usage.cache_read.input_tokens", 8_000)
	o.PutInt("gen_ai.usage.cache_creation.input_tokens", 1_000)
	o.PutInt("gen_ai.usage.reasoning.output_tokens", 200)
	want, _ := m.Map(&genai.Span{Name: "chat " + model, Attributes: o, Start: start})
	if want.Price == nil {
		t.Fatalf("%s is not priced: pick a model the data has", model)
	}

	if deref(got.CacheReadTokens) != int64(8_000) || deref(got.CacheCreationTokens) != int64(1_000) || deref(got.ReasoningTokens) != int64(200) {
		t.Errorf("cache_read %v cache_creation %v reasoning %v, want 8000 1000 200", deref(got.CacheReadTokens), deref(got.CacheCreationTokens), deref(got.ReasoningTokens))
	}
	if deref(got.InputTokens) != int64(10_000) {
		t.Errorf("input_tokens %v, want 10000 (inputTokens.total holds the cache)", deref(got.InputTokens))
	}
	if got.Price == nil || got.Cost != want.Cost {
		t.Errorf("cost %+v, want %+v (total %s): the cached input priced as uncached", got.Cost, want.Cost, prices.Decimal(want.Cost.Total()))
	}
}

// The Vercel AI SDK v6 still runs a provider package of v5's
// specification (LanguageModelV2: @ai-sdk/anthropic 2.x,
// @ai-sdk/amazon-bedrock 3.x), through its adapter (vercel/ai,
// packages/ai/src/model/as-language-model-v3.ts, convertV2UsageToV3:
// inputTokens.total = the v2 inputTokens, cacheRead = cachedInputTokens,
// noCache undefined). Those packages count their input without the cache
// (@ai-sdk/anthropic 2.0.95: inputTokens = usage.input_tokens,
// cachedInputTokens = cache_read_input_tokens), so the span's
// gen_ai.usage.input_tokens does not hold the cache reads
// ai.usage.inputTokenDetails.cacheReadTokens tells, and no
// ai.usage.inputTokenDetails.noCacheTokens is written (selectAttributes
// drops the undefined). Read as a total holding them, 800 of the 1,000
// uncached input tokens were priced as cache reads: the operation cost
// a quarter of what it did, less than when the cache was not read at all.
func TestVercelAISDKv2ProviderInputIsNotShortenedByItsCache(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const model = "claude-sonnet-4-5"

	v := pcommon.NewMap()
	v.PutStr("ai.operationId", "ai.generateText.doGenerate")
	v.PutStr("gen_ai.system", "anthropic.messages")
	v.PutStr("gen_ai.request.model", model)
	v.PutStr("gen_ai.response.model", model)
	v.PutInt("ai.usage.inputTokens", 1_000)
	v.PutInt("ai.usage.inputTokenDetails.cacheReadTokens", 800)
	v.PutInt("ai.usage.cachedInputTokens", 800)
	v.PutInt("ai.usage.outputTokens", 500)
	v.PutInt("ai.usage.totalTokens", 1_500)
	v.PutInt("gen_ai.usage.input_tokens", 1_000)
	v.PutInt("gen_ai.usage.output_tokens", 500)
	got, ok := m.Map(&genai.Span{Name: "ai.generateText.doGenerate", Attributes: v, Start: start})
	if !ok || got.Price == nil {
		t.Fatalf("not priced: %v %+v", ok, got)
	}
	// The 1,000 input tokens are uncached: at least their price.
	uncached, _ := m.Map(&genai.Span{Name: "chat " + model, Attributes: chatAttrs("anthropic", model, 1_000, 500), Start: start})
	if uncached.Price == nil {
		t.Fatalf("%s is not priced: pick a model the data has", model)
	}
	if got.Cost.Total() < uncached.Cost.Total() {
		t.Errorf("cost %s (input %d, cache reads %d), want at least %s: the v2 provider's input holds no cache, none of it is cache reads",
			prices.Decimal(got.Cost.Total()), deref(got.InputTokens), deref(got.CacheReadTokens), prices.Decimal(uncached.Cost.Total()))
	}
}
