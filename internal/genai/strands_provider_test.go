package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// Strands Agents names itself, not the model's provider, on every span it
// makes (strands-agents/sdk-python, src/strands/telemetry/tracer.py,
// _get_common_attributes: gen_ai.system "strands-agents", or
// gen_ai.provider.name "strands-agents" with OTEL_SEMCONV_STABILITY_OPT_IN
// gen_ai_latest_experimental); its chat span (start_model_invoke_span)
// carries the model id as gen_ai.request.model and the usage
// (end_model_invoke_span). "strands-agents" is no provider genai-prices
// knows, so every Strands model call was left unpriced, a null cost: the
// span names no provider, and its model finds one (as genai-prices'
// matchProvider does without a provider id), or the provider/ prefix of
// a LiteLLM model id (Strands' LiteLLMModel) does.
func TestStrandsAgentsModelCallIsPricedByItsModel(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, attr := range []string{"gen_ai.system", "gen_ai.provider.name"} {
		for _, c := range []struct{ model, provider, bare string }{
			{"gpt-4.1-nano", "openai", "gpt-4.1-nano"},                            // OpenAIModel
			{"claude-sonnet-4-20250514", "anthropic", "claude-sonnet-4-20250514"}, // AnthropicModel
			{"openai/gpt-4o", "openai", "gpt-4o"},                                 // LiteLLMModel
		} {
			a := pcommon.NewMap()
			a.PutStr("gen_ai.operation.name", "chat")
			a.PutStr(attr, "strands-agents")
			a.PutStr("gen_ai.request.model", c.model)
			a.PutInt("gen_ai.usage.prompt_tokens", 100_000)
			a.PutInt("gen_ai.usage.input_tokens", 100_000)
			a.PutInt("gen_ai.usage.completion_tokens", 10_000)
			a.PutInt("gen_ai.usage.output_tokens", 10_000)
			a.PutInt("gen_ai.usage.total_tokens", 110_000)
			got, ok := m.Map(&genai.Span{Name: "chat", Attributes: a, Start: start})
			if !ok {
				t.Fatalf("%s: not read", c.model)
			}
			want, _ := m.Map(&genai.Span{Name: "chat", Attributes: chatAttrs(c.provider, c.bare, 100_000, 10_000), Start: start})
			if want.Price == nil {
				t.Fatalf("%s %s is not priced: pick a model the data has", c.provider, c.bare)
			}
			if got.Price == nil || got.Cost != want.Cost {
				price := "none (null cost)"
				if got.Price != nil {
					price = got.Price.ID() + " " + prices.Decimal(got.Cost.Total())
				}
				t.Errorf("%s strands-agents, model %s: priced %s, want %s %s", attr, c.model, price, want.Price.ID(), prices.Decimal(want.Cost.Total()))
			}
		}
	}
}
