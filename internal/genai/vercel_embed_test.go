package genai_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// vercelEmbedSpan is a span of the Vercel AI SDK's embed or embedMany as
// its telemetry writes it (vercel/ai, packages/ai/src/embed/embed.ts and
// embed-many.ts before 118b953239, recordSpan; since then
// packages/otel/src/legacy-open-telemetry.ts, onEmbedOperationStart,
// onEmbedStart, onEmbedEnd, onEmbedOperationEnd): assembleOperationName's
// operation.name and ai.operationId, getBaseTelemetryAttributes'
// ai.model.provider, ai.model.id and ai.settings.*, the values and
// embeddings, and the usage as ai.usage.tokens on both the model call
// (doEmbed) and the call around it. No gen_ai.* attribute at all.
func vercelEmbedSpan(operationID string, tokens int64) pcommon.Map {
	a := pcommon.NewMap()
	a.PutStr("operation.name", operationID+" my-function")
	a.PutStr("resource.name", "my-function")
	a.PutStr("ai.operationId", operationID)
	a.PutStr("ai.telemetry.functionId", "my-function")
	a.PutStr("ai.model.provider", "openai.embedding")
	a.PutStr("ai.model.id", "text-embedding-3-small")
	a.PutInt("ai.settings.maxRetries", 2)
	a.PutEmptySlice("ai.values").AppendEmpty().SetStr(`"sunny day at the beach"`)
	a.PutEmptySlice("ai.embeddings").AppendEmpty().SetStr("[0.1,0.2]")
	a.PutInt("ai.usage.tokens", tokens)
	return a
}

// Each model call of embed and embedMany (a doEmbed span: embedMany makes
// one per chunk of values) is one embeddings operation, with its tokens
// and their price, as the same call written in the conventions' names;
// the call around them (ai.embed, ai.embedMany), whose ai.usage.tokens is
// theirs summed, is none: read too, its tokens and cost were counted
// twice. They made no operation at all, as they carry no gen_ai.*.
func TestVercelAISDKEmbeddingCallIsAnOperation(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m := genai.NewMapper(prices.Embedded(), false)
	same := pcommon.NewMap()
	same.PutStr("gen_ai.operation.name", "embeddings")
	same.PutStr("gen_ai.provider.name", "openai")
	same.PutStr("gen_ai.request.model", "text-embedding-3-small")
	same.PutInt("gen_ai.usage.input_tokens", 10)
	want, ok := m.Map(&genai.Span{Name: "embeddings text-embedding-3-small", Attributes: same, Start: start})
	if !ok || want.Price == nil {
		t.Fatal("the call in the conventions' names is not priced: pick a model the data has")
	}
	for _, c := range []struct {
		operationID string
		operation   bool
	}{
		{"ai.embed.doEmbed", true},
		{"ai.embedMany.doEmbed", true},
		{"ai.embed", false},
		{"ai.embedMany", false},
	} {
		got, ok := m.Map(&genai.Span{Name: c.operationID, Attributes: vercelEmbedSpan(c.operationID, 10), Start: start})
		if ok != c.operation {
			t.Errorf("%s: read as an operation %v, want %v", c.operationID, ok, c.operation)
			continue
		}
		if !ok {
			continue
		}
		if got.Operation != "embeddings" || got.Provider != want.Provider || got.RequestModel != want.RequestModel {
			t.Errorf("%s: operation %q provider %q model %q, want embeddings %q %q", c.operationID, got.Operation, got.Provider, got.RequestModel, want.Provider, want.RequestModel)
		}
		if deref(got.InputTokens) != int64(10) || deref(got.TotalTokens) != int64(10) || got.OutputTokens != nil {
			t.Errorf("%s: input %v output %v total %v, want 10 none 10", c.operationID, deref(got.InputTokens), deref(got.OutputTokens), deref(got.TotalTokens))
		}
		if got.Price == nil || got.Price.ID() != want.Price.ID() || got.Cost != want.Cost {
			t.Errorf("%s: price %v cost %+v, want %s %+v", c.operationID, got.Price, got.Cost, want.Price.ID(), want.Cost)
		}
	}
}

// Only the value of ai.operationId tells the model call from the call
// around it (both carry the same attributes otherwise, usage included):
// another id, or the id in another type, makes no operation.
func TestVercelAISDKOtherOperationIDsAreNoEmbedding(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	for _, set := range []func(pcommon.Map){
		func(a pcommon.Map) { a.PutStr("ai.operationId", "ai.embed.doEmbed.x") },
		func(a pcommon.Map) { a.PutStr("ai.operationId", "AI.EMBED.DOEMBED") },
		func(a pcommon.Map) { a.PutEmptySlice("ai.operationId").AppendEmpty().SetStr("ai.embed.doEmbed") },
		func(a pcommon.Map) { a.Remove("ai.operationId") },
	} {
		a := vercelEmbedSpan("ai.embed.doEmbed", 10)
		set(a)
		if op, ok := m.Map(&genai.Span{Name: "ai.embed.doEmbed", Attributes: a}); ok {
			t.Errorf("%v: read as %s %s", a.AsRaw()["ai.operationId"], op.Convention, op.Operation)
		}
	}
}

// An embedding call names its provider as the SDK's provider package
// names its embedding model (ai.model.provider): the provider and the
// API, which for Azure is "embeddings" and for Cohere "textEmbedding",
// not "embedding". Those were kept whole ("azure.embeddings"), a
// provider no price is listed under: the call went unpriced where the
// same provider's chat call, "azure.chat", is Azure's.
func TestVercelAISDKEmbeddingProvidersAreTheirChatsProviders(t *testing.T) {
	m := genai.NewMapper(prices.Embedded(), false)
	for embed, chat := range map[string]string{
		"openai.embedding": "openai.chat", "azure.embeddings": "azure.chat", "cohere.textEmbedding": "cohere.chat",
		"mistral.embedding": "mistral.chat",
	} {
		a := vercelEmbedSpan("ai.embed.doEmbed", 10)
		a.PutStr("ai.model.provider", embed)
		got, ok := m.Map(&genai.Span{Name: "ai.embed.doEmbed", Attributes: a})
		c := pcommon.NewMap()
		c.PutStr("ai.operationId", "ai.generateText.doGenerate")
		c.PutStr("gen_ai.system", chat)
		want, wantOK := m.Map(&genai.Span{Name: "ai.generateText.doGenerate", Attributes: c})
		if !ok || !wantOK || got.Provider != want.Provider {
			t.Errorf("%s: provider %q, want %q as %s's", embed, got.Provider, want.Provider, chat)
		}
	}
}
