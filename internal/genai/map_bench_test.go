package genai_test

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// BenchmarkMap reads the operation of a Traceloop chat span whose prompt
// and completion are flattened into attributes (prefix.N.role, .content),
// as OpenLLMetry writes them: a span of ~10 attributes and one of ~100.
func BenchmarkMap(b *testing.B) {
	for _, messages := range []int{2, 45} {
		attrs := pcommon.NewMap()
		attrs.PutStr("llm.request.type", "chat")
		attrs.PutStr("gen_ai.system", "openai")
		attrs.PutStr("gen_ai.request.model", "gpt-4o")
		attrs.PutStr("gen_ai.response.model", "gpt-4o-2024-08-06")
		attrs.PutInt("gen_ai.usage.prompt_tokens", 1200)
		attrs.PutInt("gen_ai.usage.completion_tokens", 300)
		for i := range messages {
			attrs.PutStr(fmt.Sprintf("gen_ai.prompt.%d.role", i), "user")
			attrs.PutStr(fmt.Sprintf("gen_ai.prompt.%d.content", i), "What is the weather like?")
		}
		attrs.PutStr("gen_ai.completion.0.finish_reason", "stop")
		m := genai.NewMapper(prices.Embedded(), false)
		s := genai.Span{Name: "openai.chat", Attributes: attrs, Start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
		b.Run(fmt.Sprintf("attributes=%d", attrs.Len()), func(b *testing.B) {
			for b.Loop() {
				if _, ok := m.Map(&s); !ok {
					b.Fatal("not an operation")
				}
			}
		})
	}
}
