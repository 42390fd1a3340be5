package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// OpenInference's Vertex AI instrumentation writes llm.model_name from the
// GenerateContentRequest's model (Arize-ai/openinference,
// python/instrumentation/openinference-instrumentation-vertexai/src/
// openinference/instrumentation/vertexai/_wrapper.py, _update_span:
// span.set_attribute(LLM_MODEL_NAME, req.model)), which the Vertex AI API
// takes as the model's resource name,
// "projects/{project}/locations/{location}/publishers/google/models/{model}"
// (that package's examples/gapic.client.generate_content.py). The model is
// the part after models/; as written whole it found no price: a null
// cost for every such call.
func TestVertexAIResourceNameIsPricedAsItsModel(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ resource, bare string }{
		{"projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"publishers/google/models/gemini-2.5-pro", "gemini-2.5-pro"},
	} {
		a := pcommon.NewMap()
		a.PutStr("openinference.span.kind", "LLM")
		a.PutStr("llm.provider", "google")
		a.PutStr("llm.system", "vertexai")
		a.PutStr("llm.model_name", c.resource)
		a.PutInt("llm.token_count.prompt", 100_000)
		a.PutInt("llm.token_count.completion", 10_000)
		a.PutInt("llm.token_count.total", 110_000)
		got, ok := m.Map(&genai.Span{Name: "GenerateContent", Attributes: a, Start: start})
		if !ok {
			t.Fatalf("%s: not read", c.resource)
		}
		want, _ := m.Map(&genai.Span{Name: "chat", Attributes: chatAttrs("gcp.gemini", c.bare, 100_000, 10_000), Start: start})
		if want.Price == nil {
			t.Fatalf("%s is not priced: pick a model the data has", c.bare)
		}
		if got.Price == nil || got.Cost != want.Cost {
			price := "none (null cost)"
			if got.Price != nil {
				price = got.Price.ID() + " " + prices.Decimal(got.Cost.Total())
			}
			t.Errorf("%s: priced %s, want %s %s", c.resource, price, want.Price.ID(), prices.Decimal(want.Cost.Total()))
		}
	}
}

// Only a Vertex AI resource name ("[projects/P/locations/L/]publishers/
// PUB/models/M") names its model after models/: another name holding
// "/models/" is no such name. vLLM serves a model under the path it was
// loaded from ("/mnt/models/gpt-oss-120b", KServe's mount), called with
// an OpenAI client (provider openai); Fireworks names an account's own
// model "accounts/A/models/M". Neither ran at OpenAI's API, and neither
// was priced before the resource names were read: a self-hosted or
// custom model's cost is unknown (null), not OpenAI's price of the model
// its file is named after.
func TestModelPathIsNoVertexAIResourceName(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, model := range []string{
		"/mnt/models/gpt-oss-120b",
		"/data/models/gpt-4o",
		"accounts/my-account/models/gpt-oss-120b",
	} {
		op, ok := m.Map(&genai.Span{Name: "chat", Attributes: chatAttrs("openai", model, 100_000, 10_000), Start: start})
		if !ok {
			t.Fatalf("%s: not read", model)
		}
		if op.Price != nil {
			t.Errorf("provider openai, model %s: priced as %s (%s), want no price: not a Vertex AI resource name, not OpenAI's model",
				model, op.Price.ID(), prices.Decimal(op.Cost.Total()))
		}
	}
}
