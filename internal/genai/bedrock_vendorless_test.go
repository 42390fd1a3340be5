package genai_test

import (
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// OpenLLMetry's Bedrock instrumentation writes gen_ai.request.model
// without the model id's vendor and region (traceloop/openllmetry,
// packages/opentelemetry-instrumentation-bedrock/opentelemetry/
// instrumentation/bedrock/__init__.py: _get_vendor_model and
// _cross_region_check split "us.amazon.nova-pro-v1:0" into the vendor
// "amazon" and the model "nova-pro-v1:0", and the span gets the model;
// gen_ai.provider.name is aws.bedrock). Bedrock's Anthropic models were
// found so (the data's match takes "claude-…-v1:0"); its other vendors'
// were not: a null cost for every Nova, Llama or Mistral call.
func TestBedrockModelWithoutItsVendorIsPriced(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ written, full string }{
		{"nova-pro-v1:0", "amazon.nova-pro-v1:0"},
		{"llama3-3-70b-instruct-v1:0", "meta.llama3-3-70b-instruct-v1:0"},
	} {
		want, _ := m.Map(&genai.Span{Name: "chat", Attributes: chatAttrs("aws.bedrock", c.full, 100_000, 10_000), Start: start})
		if want.Price == nil {
			t.Fatalf("aws.bedrock %s is not priced: pick a model the data has", c.full)
		}
		got, ok := m.Map(&genai.Span{Name: "chat " + c.written, Attributes: chatAttrs("aws.bedrock", c.written, 100_000, 10_000), Start: start})
		if !ok || got.Price == nil || got.Cost != want.Cost {
			t.Errorf("aws.bedrock %s: priced %v cost %+v, want %s %+v", c.written, got.Price != nil, got.Cost, want.Price.ID(), want.Cost)
		}
	}
}
