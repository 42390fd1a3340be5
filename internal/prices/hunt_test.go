package prices

import (
	"testing"
	"time"
)

// A provider the data does not know (a self-hosted server: ollama, vllm)
// names where the model ran; genai-prices then has no price for it:
// calcPrice (packages/js/src/api.ts) calls matchProvider with the
// providerId, and matchProvider (packages/js/src/engine.ts) returns
// findProviderById's answer — undefined — without trying the providers'
// model_match, which it uses only when no providerId is given (or for
// "litellm"). tracelake instead prices the model as the API whose
// model_match takes it: a local deepseek-r1 as DeepSeek's API.
func TestHuntUnknownProviderIsNotPricedByModelMatch(t *testing.T) {
	tab := Embedded()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range [][2]string{{"ollama", "deepseek-r1:7b"}, {"vllm", "gpt-oss-120b"}} {
		if f, ok := tab.Find(c[0], c[1], at); ok {
			t.Errorf("Find(%q, %q) = %s (%s), want no price: the provider %q is not in the data", c[0], c[1], f.ID(), f.How, c[0])
		}
	}
	// Without a provider, model_match is how the provider is found.
	if f, ok := tab.Find("", "gpt-4o", at); !ok || f.ID() != "openai/gpt-4o" {
		t.Errorf("Find(\"\", gpt-4o) = %v %s, want openai/gpt-4o", ok, f.ID())
	}
}
