package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// A Bedrock model or inference-profile id ("us.anthropic.claude-…-v1:0",
// "global.anthropic.…", an inference-profile ARN) names a model on
// Bedrock, whatever provider the span names, or none:
//
//   - Claude Code on Bedrock (CLAUDE_CODE_USE_BEDROCK=1) calls the model
//     ANTHROPIC_MODEL names, an inference profile id such as
//     "apac.anthropic.claude-3-7-sonnet-20250219-v1:0"
//     (code.claude.com/docs/en/amazon-bedrock), and its
//     claude_code.llm_request span carries it as model; the span is
//     anthropic's (gen_ai.system "Always anthropic", the monitoring docs'
//     Traces table), whose prices have no such id.
//   - Strands Agents' default model is Bedrock's
//     (strands-agents/sdk-python src/strands/models/bedrock.py:
//     DEFAULT_BEDROCK_MODEL_ID = "global.anthropic.claude-sonnet-4-6"),
//     and its spans name "strands-agents" (src/strands/telemetry/tracer.py).
//
// Both were left unpriced, a null cost; priced they cost what Bedrock
// charges for that id.
func TestBedrockModelIDIsPricedAsBedrocks(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	bedrock := func(model string) genai.Operation {
		t.Helper()
		op, _ := m.Map(&genai.Span{Name: "chat", Attributes: chatAttrs("aws.bedrock", model, 100_000, 10_000), Start: start})
		if op.Price == nil {
			t.Fatalf("aws.bedrock %s is not priced: pick a model the data has", model)
		}
		return op
	}
	for _, model := range []string{"global.anthropic.claude-sonnet-4-6", "us.anthropic.claude-sonnet-4-20250514-v1:0", "apac.anthropic.claude-3-7-sonnet-20250219-v1:0"} {
		want := bedrock(model)

		cc := pcommon.NewMap()
		cc.PutStr("gen_ai.system", "anthropic")
		cc.PutStr("gen_ai.request.model", model)
		cc.PutStr("model", model)
		cc.PutInt("input_tokens", 100_000)
		cc.PutInt("output_tokens", 10_000)
		got, ok := m.Map(&genai.Span{Name: "claude_code.llm_request", Attributes: cc, Start: start})
		if !ok || got.Price == nil || got.Cost != want.Cost {
			t.Errorf("Claude Code on Bedrock, %s: provider %q priced %v cost %+v, want %s %+v", model, got.Provider, got.Price != nil, got.Cost, want.Price.ID(), want.Cost)
		}

		st := chatAttrs("strands-agents", model, 100_000, 10_000)
		got, ok = m.Map(&genai.Span{Name: "chat", Attributes: st, Start: start})
		if !ok || got.Price == nil || got.Cost != want.Cost {
			t.Errorf("Strands Agents on Bedrock, %s: priced %v cost %+v, want %s %+v", model, got.Price != nil, got.Cost, want.Price.ID(), want.Cost)
		}
	}
}
