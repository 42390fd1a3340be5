package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// The Vercel AI SDK's Claude on Vertex AI (@ai-sdk/google-vertex/anthropic)
// is @ai-sdk/anthropic's AnthropicMessagesLanguageModel under the name
// "vertex.anthropic.messages" (in v3 of the package, of the v5
// specification, as in v4), and counts as Anthropic's
// Messages API does on any cloud: in the v5 specification its inputTokens
// is input_tokens, without the cache, and cachedInputTokens is
// cache_read_input_tokens, apart (vercel/ai @ai-sdk/anthropic@2.0.95,
// anthropic-messages-language-model.ts). ai@5's ai.streamObject.doStream
// writes them as ai.usage.inputTokens (and gen_ai.usage.input_tokens) and
// ai.usage.cachedInputTokens; ai@6 adapts such a provider's usage with no
// noCacheTokens (as-language-model-v3.ts) and writes the cache reads in
// ai.usage.inputTokenDetails.cacheReadTokens. Its provider is Vertex AI's,
// whose Gemini counts the input with its cache: read as if it were Gemini's,
// the cache reads were taken out of an input that never held them, and the
// call was priced as if that much of its uncached input had not been sent.
// The same counts from the same package under Anthropic's own name
// ("anthropic.messages") are read as they are: so must these be.
func TestVercelAISDKClaudeOnVertexCacheIsNotTakenOutOfItsInput(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const model = "claude-sonnet-4-5@20250929"
	const input, cached, output = 10_000, 4_000, 500 // input: Anthropic's input_tokens, without the cache
	span := func(operationID, provider, cacheAttr string) pcommon.Map {
		return vercelCallAttrs(operationID, provider, model, input, output, cacheAttr, cached)
	}
	for _, c := range []struct{ operationID, provider, cacheAttr string }{
		{"ai.streamObject.doStream", "vertex.anthropic.messages", "ai.usage.cachedInputTokens"},
		{"ai.generateText.doGenerate", "vertex.anthropic.messages", "ai.usage.inputTokenDetails.cacheReadTokens"},
	} {
		got, ok := m.Map(&genai.Span{Name: c.operationID, Attributes: span(c.operationID, c.provider, c.cacheAttr), Start: start})
		if !ok {
			t.Fatalf("%s %s: not read", c.operationID, c.provider)
		}
		if got.Provider != "gcp.vertex_ai" {
			t.Fatalf("%s: provider %q, want gcp.vertex_ai", c.provider, got.Provider)
		}
		anthropic, _ := m.Map(&genai.Span{Name: c.operationID, Attributes: span(c.operationID, "anthropic.messages", c.cacheAttr), Start: start})
		if deref(got.InputTokens) != deref(anthropic.InputTokens) || deref(got.CacheReadTokens) != deref(anthropic.CacheReadTokens) {
			t.Errorf("%s %s %s: input %v cache_read %v, want %v %v as Anthropic's own Messages API reads",
				c.operationID, c.provider, c.cacheAttr, deref(got.InputTokens), deref(got.CacheReadTokens),
				deref(anthropic.InputTokens), deref(anthropic.CacheReadTokens))
		}
		if got.InputTokens == nil || *got.InputTokens-int64OrZero(got.CacheReadTokens) < input {
			t.Errorf("%s %s %s: uncached input %v - %v, want at least Anthropic's input_tokens %d: the cache was taken out of an input without it",
				c.operationID, c.provider, c.cacheAttr, deref(got.InputTokens), deref(got.CacheReadTokens), input)
		}
	}
}

func int64OrZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
