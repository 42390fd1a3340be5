package genai_test

import (
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// Pydantic AI writes its provider's name as gen_ai.system (and
// gen_ai.provider.name): its Gemini providers were "google-gla" and
// "google-vertex" (pydantic/pydantic-ai,
// pydantic_ai_slim/pydantic_ai/providers/google_gla.py: name 'google-gla';
// google_vertex.py: 'google-vertex'). The provider column holds
// gen_ai.provider.name's values (README: gemini / google → gcp.gemini,
// vertex_ai → gcp.vertex_ai): these were kept as written, so one
// provider's operations were split over three names.
func TestPydanticAIGoogleProvidersAreNormalised(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	for system, want := range map[string]string{"google-gla": "gcp.gemini", "google-vertex": "gcp.vertex_ai"} {
		attrs := chatAttrs(system, "gemini-2.5-flash", 1000, 100)
		op, ok := m.Map(&genai.Span{Name: "chat gemini-2.5-flash", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
		if !ok || op.Provider != want {
			t.Errorf("%s: provider %q, want %q", system, op.Provider, want)
		}
	}
}

// Pydantic AI 2.0 renamed its Vertex AI provider "google-cloud"
// (pydantic_ai_slim/pydantic_ai/providers/google_cloud.py: name
// 'google-cloud'; models/google.py keeps 'google-vertex' only to read old
// message histories), which it writes as gen_ai.system and
// gen_ai.provider.name: its operations stayed "google-cloud", apart from
// the same provider's "google-vertex" ones of 1.x.
func TestPydanticAI2GoogleCloudProviderIsVertexAI(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	attrs := chatAttrs("google-cloud", "gemini-2.5-flash", 1000, 100)
	op, ok := m.Map(&genai.Span{Name: "chat gemini-2.5-flash", Attributes: attrs, Start: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	if !ok || op.Provider != "gcp.vertex_ai" {
		t.Errorf("google-cloud: provider %q, want gcp.vertex_ai (as google-vertex)", op.Provider)
	}
}
