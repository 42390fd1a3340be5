package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// Pydantic AI names a model's system after its provider (models/openai.py:
// self._system = provider.name; instrumented.py writes it as
// gen_ai.system). Its VercelProvider (pydantic/pydantic-ai,
// pydantic_ai_slim/pydantic_ai/providers/vercel.py: name 'vercel',
// base_url https://ai-gateway.vercel.sh/v1) is the Vercel AI Gateway, a
// proxy whose model names carry their provider ("anthropic/...", split
// at '/' by its model_profile). Such a call costs what the provider's
// model costs; "vercel" is no provider of genai-prices, and it was left
// unpriced.
func TestPydanticAIVercelGatewayModelIsPricedAsItsProvider(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ model, provider, bare string }{
		{"openai/gpt-4o", "openai", "gpt-4o"},
		{"anthropic/claude-sonnet-4", "anthropic", "claude-sonnet-4"},
	} {
		a := pcommon.NewMap()
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.system", "vercel")
		a.PutStr("gen_ai.request.model", c.model)
		a.PutStr("gen_ai.response.model", c.model)
		a.PutInt("gen_ai.usage.input_tokens", 100_000)
		a.PutInt("gen_ai.usage.output_tokens", 10_000)
		got, ok := m.Map(&genai.Span{Name: "chat " + c.model, Attributes: a, Start: start})
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
			t.Errorf("vercel %s: priced %s, want %s %s", c.model, price, want.Price.ID(), prices.Decimal(want.Cost.Total()))
		}
	}
}
