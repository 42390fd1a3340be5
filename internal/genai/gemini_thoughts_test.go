package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// Gemini bills its thoughts as output, and its usage_metadata counts them
// apart: candidates_token_count leaves them out, thoughts_token_count has
// them, total_token_count adds them. genai-prices' Google extractor
// (prices/data.json, provider google, api_flavor default) takes both
// candidatesTokenCount and thoughtsTokenCount as output_tokens (and the
// thoughts as output_reasoning_tokens), so a Gemini call costs its
// candidates and its thoughts at the output price. Three instrumentations
// put the counts on their spans as they come, the output without the
// thoughts and the total with them:
//   - OpenLLMetry's google-generativeai (span_utils.py,
//     set_model_response_attributes): gen_ai.usage.output_tokens
//     candidates_token_count, gen_ai.usage.total_tokens total_token_count,
//     gen_ai.provider.name gcp.gen_ai;
//   - OpenLLMetry's vertexai (span_utils.py, set_model_response_attributes):
//     the same output, llm.usage.total_tokens, gen_ai.system "Google";
//   - OpenInference's vertexai (_wrapper.py, _parse_usage_metadata):
//     llm.token_count.completion candidates_token_count,
//     llm.token_count.total total_token_count.
//
// output_tokens includes reasoning (README): it is the candidates and the
// thoughts, reasoning_tokens the thoughts, and the cost genai-prices'.
func TestGeminiThoughtsLeftOutOfTheOutputAreOutput(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name                               string
		attrs                              func() pcommon.Map
		model                              string
		input, candidates, thoughts, total int64
	}{
		{
			name: "OpenLLMetry google-generativeai", model: "gemini-2.5-flash",
			input: 1000, candidates: 200, thoughts: 600, total: 1800,
			attrs: func() pcommon.Map {
				a := pcommon.NewMap()
				a.PutStr("gen_ai.provider.name", "gcp.gen_ai")
				a.PutStr("gen_ai.operation.name", "generate_content")
				a.PutStr("gen_ai.request.model", "gemini-2.5-flash")
				a.PutStr("gen_ai.response.model", "gemini-2.5-flash")
				a.PutInt("gen_ai.usage.total_tokens", 1800)
				a.PutInt("gen_ai.usage.output_tokens", 200)
				a.PutInt("gen_ai.usage.input_tokens", 1000)
				return a
			},
		},
		{
			// Past 200,000 input tokens gemini-2.5-pro's output costs its
			// higher tier: the thoughts too.
			name: "OpenLLMetry vertexai", model: "gemini-2.5-pro",
			input: 250_000, candidates: 1000, thoughts: 4000, total: 255_000,
			attrs: func() pcommon.Map {
				a := pcommon.NewMap()
				a.PutStr("gen_ai.system", "Google")
				a.PutStr("llm.request.type", "completion")
				a.PutStr("gen_ai.request.model", "gemini-2.5-pro")
				a.PutStr("gen_ai.response.model", "gemini-2.5-pro")
				a.PutInt("llm.usage.total_tokens", 255_000)
				a.PutInt("gen_ai.usage.output_tokens", 1000)
				a.PutInt("gen_ai.usage.input_tokens", 250_000)
				return a
			},
		},
		{
			name: "OpenInference vertexai", model: "gemini-2.5-flash",
			input: 3000, candidates: 500, thoughts: 1500, total: 5000,
			attrs: func() pcommon.Map {
				a := pcommon.NewMap()
				a.PutStr("openinference.span.kind", "LLM")
				a.PutStr("llm.provider", "google")
				a.PutStr("llm.system", "vertexai")
				a.PutStr("llm.model_name", "gemini-2.5-flash")
				a.PutInt("llm.token_count.prompt", 3000)
				a.PutInt("llm.token_count.completion", 500)
				a.PutInt("llm.token_count.total", 5000)
				return a
			},
		},
	}
	table := prices.Embedded()
	m := genai.NewMapper(table, false)
	for _, c := range cases {
		op, ok := m.Map(&genai.Span{Name: "generate_content " + c.model, Attributes: c.attrs(), Start: start})
		if !ok {
			t.Fatalf("%s: not read", c.name)
		}
		wantOutput := c.candidates + c.thoughts
		if deref(op.OutputTokens) != wantOutput || deref(op.ReasoningTokens) != c.thoughts ||
			deref(op.InputTokens) != c.input || deref(op.TotalTokens) != c.total {
			t.Errorf("%s: input %v output %v reasoning %v total %v, want %d %d %d %d: the thoughts are output",
				c.name, deref(op.InputTokens), deref(op.OutputTokens), deref(op.ReasoningTokens), deref(op.TotalTokens),
				c.input, wantOutput, c.thoughts, c.total)
		}
		// genai-prices' usage for the same response: input_tokens the
		// prompt, output_tokens the candidates and the thoughts.
		f, ok := table.Find(op.Provider, c.model, start)
		if !ok {
			t.Fatalf("%s: %s/%s has no price", c.name, op.Provider, c.model)
		}
		want, err := f.Prices.Cost(prices.Usage{Input: c.input, Output: wantOutput, Reasoning: c.thoughts})
		if err != nil {
			t.Fatal(err)
		}
		if op.Price == nil || op.Cost != want {
			t.Errorf("%s: cost %+v (priced: %t), want %+v: the thoughts at the output price",
				c.name, op.Cost, op.Price != nil, want)
		}
	}
}

// OpenInference's google-genai and google-adk instrumentations fold the
// thoughts into llm.token_count.completion themselves (_utils.py,
// _wrappers.py: completion = candidates + thoughts, reasoning the
// thoughts, total at least prompt + completion): nothing is left out, and
// nothing is added a second time.
func TestGeminiThoughtsAlreadyInTheOutputAreNotAddedAgain(t *testing.T) {
	a := pcommon.NewMap()
	a.PutStr("openinference.span.kind", "LLM")
	a.PutStr("llm.provider", "google")
	a.PutStr("llm.system", "vertexai")
	a.PutStr("llm.model_name", "gemini-2.5-flash")
	a.PutInt("llm.token_count.prompt", 1000)
	a.PutInt("llm.token_count.completion", 800)
	a.PutInt("llm.token_count.completion_details.reasoning", 600)
	a.PutInt("llm.token_count.total", 1800)
	op, ok := genai.NewMapper(prices.Embedded(), false).Map(&genai.Span{Name: "GenerateContent", Attributes: a, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	if !ok {
		t.Fatal("not read")
	}
	if deref(op.OutputTokens) != int64(800) || deref(op.ReasoningTokens) != int64(600) {
		t.Errorf("output %v reasoning %v, want 800 600", deref(op.OutputTokens), deref(op.ReasoningTokens))
	}
}
