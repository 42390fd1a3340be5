package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// The Vercel AI SDK's default provider for a model given as a string is
// its AI Gateway, a proxy in front of the providers: its language model's
// provider is "gateway" (vercel/ai, packages/gateway/src/gateway-provider.ts,
// createLanguageModel: provider: 'gateway') and its model ids name the
// provider as a prefix ("openai/gpt-4o", GatewayModelId in
// gateway-language-model-settings.ts). generate-text.ts writes
// model.provider as gen_ai.system and the model id as
// gen_ai.request.model. Such a call costs what the provider's model costs:
// it was left unpriced (null cost) since "gateway" is no provider of
// genai-prices, as LiteLLM's "openai/gpt-4o" was before its prefix was
// read.
func TestVercelAIGatewayModelIsPricedAsItsProvider(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ model, provider, bare string }{
		{"openai/gpt-4o", "openai", "gpt-4o"},
		{"anthropic/claude-sonnet-4", "anthropic", "claude-sonnet-4"},
		{"xai/grok-3", "x_ai", "grok-3"},
	} {
		a := pcommon.NewMap()
		a.PutStr("ai.operationId", "ai.generateText.doGenerate")
		a.PutStr("ai.model.provider", "gateway")
		a.PutStr("ai.model.id", c.model)
		a.PutStr("gen_ai.system", "gateway")
		a.PutStr("gen_ai.request.model", c.model)
		a.PutStr("gen_ai.response.model", c.model)
		a.PutInt("gen_ai.usage.input_tokens", 100_000)
		a.PutInt("gen_ai.usage.output_tokens", 10_000)
		got, ok := m.Map(&genai.Span{Name: "ai.generateText.doGenerate", Attributes: a, Start: start})
		if !ok {
			t.Fatalf("%s: not read", c.model)
		}
		want, _ := m.Map(&genai.Span{Name: "chat", Attributes: chatAttrs(c.provider, c.bare, 100_000, 10_000), Start: start})
		if want.Price == nil {
			t.Fatalf("%s %s is not priced: pick a model the data has", c.provider, c.bare)
		}
		if got.Price == nil || got.Cost != want.Cost || got.Price.ID() != want.Price.ID() {
			price := "none (null cost)"
			if got.Price != nil {
				price = got.Price.ID() + " " + prices.Decimal(got.Cost.Total())
			}
			t.Errorf("gateway %s: priced %s, want %s %s", c.model, price, want.Price.ID(), prices.Decimal(want.Cost.Total()))
		}
	}
}
