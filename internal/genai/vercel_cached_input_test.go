package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// The Vercel AI SDK tells a call's cached input in
// ai.usage.cachedInputTokens alone on its object spans: v6's
// ai.streamObject.doStream (vercel/ai ai@6.0.264,
// packages/ai/src/generate-object/stream-object.ts) and the
// ai.generateObject.doGenerate and ai.streamObject.doStream of its OTel
// package (packages/otel/src/legacy-open-telemetry.ts, onObjectStepEnd)
// write ai.usage.cachedInputTokens and no ai.usage.inputTokenDetails.*;
// and a provider of v5's specification under v6 (its adapter,
// as-language-model-v3.ts convertV2UsageToV3: noCache undefined) has
// ai.usage.inputTokenDetails.cacheReadTokens without noCacheTokens. On
// OpenAI's API the input count holds its cache (prompt_tokens with
// prompt_tokens_details.cached_tokens; @ai-sdk/openai's inputTokens is it,
// in both specifications), and genai-prices' OpenAI extractor
// (prices/data.json) takes cached_tokens as cache_read_tokens: the cached
// input costs the cache-read price, as the same call written in the
// conventions' names does. Unread, it cost the uncached input price.
func TestVercelAISDKCachedInputOnOpenAIIsPriced(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const model = "gpt-4o-2024-08-06"
	span := func(operationID, provider, cacheAttr string) pcommon.Map {
		return vercelCallAttrs(operationID, provider, model, 10_000, 500, cacheAttr, 8_000)
	}
	o := chatAttrs("openai", model, 10_000, 500)
	o.PutInt("gen_ai.usage.cache_read.input_tokens", 8_000)
	want, _ := m.Map(&genai.Span{Name: "chat " + model, Attributes: o, Start: start})
	if want.Price == nil || want.Cost.CacheRead == 0 {
		t.Fatalf("%s has no cache-read price: pick a model the data prices so", model)
	}
	for _, c := range []struct{ operationID, provider, cacheAttr string }{
		{"ai.streamObject.doStream", "openai.responses", "ai.usage.cachedInputTokens"},
		{"ai.generateObject.doGenerate", "openai.chat", "ai.usage.cachedInputTokens"},
		{"ai.generateText.doGenerate", "openai.chat", "ai.usage.inputTokenDetails.cacheReadTokens"},
	} {
		got, ok := m.Map(&genai.Span{Name: c.operationID, Attributes: span(c.operationID, c.provider, c.cacheAttr), Start: start})
		if !ok {
			t.Fatalf("%s: not read", c.operationID)
		}
		if deref(got.CacheReadTokens) != int64(8_000) || deref(got.InputTokens) != int64(10_000) {
			t.Errorf("%s %s: cache_read %v input %v, want 8000 10000", c.operationID, c.cacheAttr, deref(got.CacheReadTokens), deref(got.InputTokens))
		}
		if got.Price == nil || got.Cost != want.Cost {
			t.Errorf("%s %s: cost %+v, want %+v: the cached input at the cache-read price", c.operationID, c.cacheAttr, got.Cost, want.Cost)
		}
	}
}

// vercelCallAttrs are the attributes the Vercel AI SDK writes on a model
// call's span (ai.generateText.doGenerate, ai.streamObject.doStream, …)
// of provider ("openai.chat", "vertex.anthropic.messages") and model:
// its input, output and their sum as the provider's usage tells them, and
// cached tokens under cacheAttr.
func vercelCallAttrs(operationID, provider, model string, input, output int64, cacheAttr string, cached int64) pcommon.Map {
	v := pcommon.NewMap()
	v.PutStr("operation.name", operationID)
	v.PutStr("ai.operationId", operationID)
	v.PutStr("ai.model.provider", provider)
	v.PutStr("ai.model.id", model)
	v.PutStr("gen_ai.system", provider)
	v.PutStr("gen_ai.request.model", model)
	v.PutStr("gen_ai.response.model", model)
	v.PutInt("ai.usage.inputTokens", input)
	v.PutInt("ai.usage.outputTokens", output)
	v.PutInt("ai.usage.totalTokens", input+output)
	v.PutInt(cacheAttr, cached)
	v.PutInt("gen_ai.usage.input_tokens", input)
	v.PutInt("gen_ai.usage.output_tokens", output)
	return v
}
