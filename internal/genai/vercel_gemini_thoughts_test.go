package genai_test

import (
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// The Vercel AI SDK's Gemini providers of the v5 specification
// (@ai-sdk/google@2's "google.generative-ai", @ai-sdk/google-vertex@3's
// "google.vertex.chat") pass Gemini's usage on as it comes
// (google-generative-ai-language-model.ts): outputTokens
// candidatesTokenCount, without the thoughts, reasoningTokens
// thoughtsTokenCount, totalTokens totalTokenCount, with them. ai@5's
// ai.streamText.doStream and ai.streamObject.doStream write that usage as
// it is: gen_ai.usage.output_tokens the candidates, ai.usage.totalTokens
// Gemini's total, ai.usage.reasoningTokens the thoughts. Gemini bills the
// thoughts as output and genai-prices counts them in output_tokens, as
// for OpenLLMetry's and OpenInference's Vertex AI spans
// (TestGeminiThoughtsLeftOutOfTheOutputAreOutput); with no total read from
// these spans, a thinking call was priced as if it had not thought.
func TestVercelAISDKGeminiThoughtsAreOutput(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const model = "gemini-2.5-flash"
	const prompt, cached, candidates, thoughts = 1_000, 400, 200, 600
	for _, c := range []struct{ operationID, provider string }{
		{"ai.streamText.doStream", "google.generative-ai"},
		{"ai.streamObject.doStream", "google.vertex.chat"},
	} {
		a := vercelCallAttrs(c.operationID, c.provider, model, prompt, candidates, "ai.usage.cachedInputTokens", cached)
		a.PutInt("ai.usage.totalTokens", prompt+candidates+thoughts)
		a.PutInt("ai.usage.reasoningTokens", thoughts)
		op, ok := m.Map(&genai.Span{Name: c.operationID, Attributes: a, Start: start})
		if !ok {
			t.Fatalf("%s %s: not read", c.operationID, c.provider)
		}
		if deref(op.OutputTokens) != int64(candidates+thoughts) || deref(op.ReasoningTokens) != int64(thoughts) ||
			deref(op.InputTokens) != int64(prompt) || deref(op.CacheReadTokens) != int64(cached) {
			t.Errorf("%s %s: input %v cache_read %v output %v reasoning %v, want %d %d %d %d: the thoughts are output",
				c.operationID, c.provider, deref(op.InputTokens), deref(op.CacheReadTokens), deref(op.OutputTokens),
				deref(op.ReasoningTokens), prompt, cached, candidates+thoughts, thoughts)
		}
		f, ok := prices.Embedded().Find(op.Provider, model, start)
		if !ok {
			t.Fatalf("%s/%s has no price", op.Provider, model)
		}
		// genai-prices' usage of the same response: input_tokens the
		// prompt (cache_read_tokens of it), output_tokens the candidates
		// and the thoughts.
		want, err := f.Prices.Cost(prices.Usage{Input: prompt, CacheRead: cached, Output: candidates + thoughts, Reasoning: thoughts})
		if err != nil {
			t.Fatal(err)
		}
		if op.Price == nil || op.Cost != want {
			t.Errorf("%s %s: cost %+v (priced: %t), want %+v: the thoughts at the output price",
				c.operationID, c.provider, op.Cost, op.Price != nil, want)
		}
	}
}
