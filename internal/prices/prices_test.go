package prices

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fixture(t *testing.T) *Table {
	t.Helper()
	data, err := os.ReadFile("testdata/table.json")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

var noon = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestFind(t *testing.T) {
	tab := fixture(t)
	cases := []struct {
		provider, model string
		at              time.Time
		id, how         string // id "" when no price is found
	}{
		{"anthropic", "claude-sonnet-4-5-20250929", noon, "anthropic/claude-sonnet-4-5", MatchExact},
		{"anthropic", "Claude-Sonnet-4.5", noon, "anthropic/claude-sonnet-4-5", MatchExact}, // case is ignored
		{"anthropic", "anthropic/claude-sonnet-4-5", noon, "anthropic/claude-sonnet-4-5", MatchNormalised},
		{"", "claude-sonnet-4-5", noon, "anthropic/claude-sonnet-4-5", MatchAlias},           // provider from the model
		{"openai", "gpt-4o-20240806", noon, "openai/gpt-4o", MatchNormalised},                // dated suffix
		{"openai", "gpt-4o-mini", noon, "openai/gpt-4o-mini", MatchExact},                    // and
		{"azure.ai.openai", "gpt-4o", noon, "openai/gpt-4o", MatchAlias},                     // fallback provider
		{"azure.ai.openai", "phi-4-mini", noon, "azure/phi-4", MatchExact},                   // mapped provider id
		{"anthropic", "claude-opus-5-20261101", noon, "anthropic/claude-opus-5", MatchExact}, // regex
		{"anthropic", "CLAUDE-OPUS-5-20261101", noon, "anthropic/claude-opus-5", MatchExact}, // a regex too is given the lowercased id
		{"openai", "gpt-unknown", noon, "", ""},
		{"someone", "mystery-model", noon, "", ""},
		{"openai", "", noon, "", ""},
	}
	// The second round is answered from what Find remembered.
	for _, round := range []string{"found", "remembered"} {
		for _, c := range cases {
			f, ok := tab.Find(c.provider, c.model, c.at)
			if c.id == "" {
				if ok {
					t.Errorf("%s: Find(%q, %q) = %s, want no price", round, c.provider, c.model, f.ID())
				}
				continue
			}
			if !ok || f.ID() != c.id || f.How != c.how || !reflect.DeepEqual(f.Prices, f.Model.PricesAt(c.at)) {
				t.Errorf("%s: Find(%q, %q) = %v %s %s, want %s %s", round, c.provider, c.model, ok, f.ID(), f.How, c.id, c.how)
			}
		}
	}
}

func TestPriceSelection(t *testing.T) {
	tab := fixture(t)
	cases := []struct {
		model string
		at    time.Time
		input int64 // micro-dollars per million input tokens
	}{
		{"gpt-9", time.Date(2026, 7, 29, 23, 59, 59, 0, time.UTC), 1_000_000},
		{"gpt-9", time.Date(2026, 7, 30, 0, 0, 0, 0, time.UTC), 3_000_000}, // from the start date on
		{"deepseek-chat", time.Date(2026, 11, 30, 0, 29, 59, 0, time.UTC), 135_000},
		{"deepseek-chat", time.Date(2026, 11, 30, 0, 30, 0, 0, time.UTC), 270_000},                    // the window's start is in it
		{"deepseek-chat", time.Date(2026, 11, 30, 16, 30, 0, 0, time.UTC), 135_000},                   // its end is not
		{"deepseek-chat", time.Date(2026, 11, 30, 17, 29, 0, 0, time.FixedZone("+1", 3600)), 270_000}, // 16:29 UTC
	}
	for _, c := range cases {
		f, ok := tab.Find("", c.model, c.at)
		if !ok {
			// deepseek has no model_match: name the provider.
			f, ok = tab.Find("deepseek", c.model, c.at)
		}
		if !ok || f.Prices.Input.Base != c.input {
			t.Errorf("%s at %s: input price %d, want %d", c.model, c.at, f.Prices.Input.Base, c.input)
		}
	}
}

func TestCost(t *testing.T) {
	tab := fixture(t)
	price := func(provider, model string) Prices {
		f, ok := tab.Find(provider, model, noon)
		if !ok {
			t.Fatalf("no price for %s", model)
		}
		return f.Prices
	}
	cases := []struct {
		name   string
		prices Prices
		usage  Usage
		// want in dollars: input, cache read, cache write, output, total
		want [5]string
	}{
		{"cache read split out of the input", price("openai", "gpt-4o"), Usage{Input: 1000, CacheRead: 200, Output: 500},
			// 800 × $2.5/M, 200 × $1.25/M, 500 × $10/M
			[5]string{"0.002000000000", "0.000250000000", "0.000000000000", "0.005000000000", "0.007250000000"}},
		{"no cache write price: written tokens cost the input price", price("openai", "gpt-4o"), Usage{Input: 1000, CacheWrite: 300, Output: 0},
			[5]string{"0.002500000000", "0.000000000000", "0.000000000000", "0.000000000000", "0.002500000000"}},
		{"every tier follows the total input", price("anthropic", "claude-sonnet-4-5"), Usage{Input: 250_000, CacheRead: 100_000, CacheWrite: 50_000, Output: 1000},
			// 100k × $6/M, 100k × $0.6/M, 50k × $7.5/M, 1000 × $22.5/M
			[5]string{"0.600000000000", "0.060000000000", "0.375000000000", "0.022500000000", "1.057500000000"}},
		{"at the tier's start the base applies", price("anthropic", "claude-sonnet-4-5"), Usage{Input: 200_000},
			[5]string{"0.600000000000", "0.000000000000", "0.000000000000", "0.000000000000", "0.600000000000"}},
		{"binary noise in a price is rounded away", price("openai", "gpt-4o-mini"), Usage{Input: 1_000_000, Output: 1},
			[5]string{"0.150000000000", "0.000000000000", "0.000000000000", "0.000000600000", "0.150000600000"}},
		{"a per-request price charges one request", price("perplexity", "sonar"), Usage{Input: 10, Output: 10},
			// $12 per thousand requests
			[5]string{"0.000010000000", "0.000000000000", "0.000000000000", "0.000010000000", "0.012020000000"}},
	}
	for _, c := range cases {
		got, err := c.prices.Cost(c.usage)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		have := [5]string{Decimal(got.Input), Decimal(got.CacheRead), Decimal(got.CacheWrite), Decimal(got.Output), Decimal(got.Total())}
		if have != c.want {
			t.Errorf("%s: cost %v, want %v", c.name, have, c.want)
		}
	}
}

// Cache tokens are part of the input (OpenTelemetry's input_tokens
// includes them): where the model prices them apart and they are more than
// the input, the counts contradict each other (an instrumentation that
// reports Anthropic's input without its cache) and there is no cost, as
// genai-prices' computeLeafValues throws — not an input charged as 0.
// Where the model has no cache price the cache tokens are input tokens,
// and nothing is split out of the input.
func TestCacheTokensPastTheInputHaveNoCost(t *testing.T) {
	tab := fixture(t)
	sonnet, ok := tab.Find("anthropic", "claude-sonnet-4-5", noon)
	if !ok {
		t.Fatal("no price for claude-sonnet-4-5")
	}
	for _, u := range []Usage{{Input: 100, CacheRead: 1000, Output: 10}, {Input: 100, CacheRead: 60, CacheWrite: 60}} {
		if got, err := sonnet.Prices.Cost(u); !errors.Is(err, ErrCacheExceedsInput) {
			t.Errorf("%+v: cost %+v, %v; want %v", u, got, err, ErrCacheExceedsInput)
		}
	}
	if _, err := sonnet.Prices.Cost(Usage{Input: 120, CacheRead: 60, CacheWrite: 60}); err != nil {
		t.Errorf("cache parts that are the whole input: %v", err)
	}
	gpt4o, ok := tab.Find("openai", "gpt-4o", noon) // a cache read price, no cache write price
	if !ok {
		t.Fatal("no price for gpt-4o")
	}
	if _, err := gpt4o.Prices.Cost(Usage{Input: 100, CacheWrite: 1000}); err != nil {
		t.Errorf("cache writes without a price of their own are not split out: %v", err)
	}
}

// A cost genai_operations cannot hold (tokens no operation has, from a
// bogus attribute) is refused rather than wrapped around or left to fail
// the load of every row beside it; the largest that fits is kept.
func TestCostOutOfRange(t *testing.T) {
	f, ok := fixture(t).Find("openai", "gpt-4o", noon)
	if !ok {
		t.Fatal("no price for gpt-4o")
	}
	gpt4o := f.Prices // $2.5/M input, $10/M output
	for _, c := range []struct {
		name  string
		usage Usage
		ok    bool
	}{
		{"a product past 64 bits", Usage{Input: 9007199254740993}, false},
		{"a part past a million dollars", Usage{Output: 100_000_000_001}, false},
		{"parts that fit, a total that does not", Usage{Input: 300_000_000_000, Output: 30_000_000_000}, false},
		{"the most one part holds", Usage{Output: 99_999_999_999}, true},
	} {
		got, err := gpt4o.Cost(c.usage)
		if ok := err == nil; ok != c.ok || !ok && !errors.Is(err, ErrCostOutOfRange) {
			t.Errorf("%s: %v, want ok %v (cost %+v)", c.name, err, c.ok, got)
		}
		if total := got.Total(); total < 0 || total > MaxCost {
			t.Errorf("%s: total %d outside 0..MaxCost", c.name, total)
		}
	}
}

// The embedded export parses whole: every regex compiles in Go, every price
// is held to within 0.001% (micro-dollars per million tokens; a few are
// repeating decimals such as $1/12), and the models agents use most are
// priced.
func TestEmbedded(t *testing.T) {
	tab := Embedded()
	if tab.Skipped != 0 {
		t.Errorf("%d models have a match Go cannot compile", tab.Skipped)
	}
	if !strings.HasPrefix(tab.Source, "npm @pydantic/genai-prices@") || !strings.HasPrefix(tab.License, "MIT") || tab.Exported == "" {
		t.Errorf("provenance missing: %q %q %q", tab.Source, tab.License, tab.Exported)
	}
	var raw struct {
		Providers []struct {
			Models []struct {
				Prices json.RawMessage `json:"prices"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(embedded, &raw); err != nil {
		t.Fatal(err)
	}
	checked := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case float64:
			checked++
			if v > 0 && math.Abs(v*1e6-math.Round(v*1e6))/(v*1e6) > 1e-5 {
				t.Errorf("price %v is not held to 0.001%% in micro-dollars", v)
			}
		}
	}
	for _, p := range raw.Providers {
		for _, m := range p.Models {
			var v any
			if err := json.Unmarshal(m.Prices, &v); err != nil {
				t.Fatal(err)
			}
			walk(v)
		}
	}
	if checked < 1000 {
		t.Errorf("checked %d prices; the export looks truncated", checked)
	}
	for _, c := range []struct{ provider, model string }{
		{"openai", "gpt-4o"}, {"anthropic", "claude-sonnet-4-5-20250929"}, {"gcp.gemini", "gemini-2.5-pro"},
		{"aws.bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0"}, {"", "claude-3-5-haiku-20241022"},
	} {
		if f, ok := tab.Find(c.provider, c.model, noon); !ok || !f.Prices.Input.Set {
			t.Errorf("no input price for %s %s", c.provider, c.model)
		}
	}
}

func TestLeadingNegativeLookahead(t *testing.T) {
	tab := fixture(t)
	m := &tab.Providers[0].Models[1].Match
	re := "^(?!.*-[tT][tT][sS](?:$|-))gemini-2\\.5-pro"
	m.Regex, m.Or, m.re = &re, nil, nil
	if bad := m.compile(); bad != 0 {
		t.Fatal("the lookahead did not compile")
	}
	for id, want := range map[string]bool{"gemini-2.5-pro": true, "gemini-2.5-pro-preview": true, "gemini-2.5-pro-tts": false, "gemini-2.5-pro-TTS-x": false, "gemini-2.0": false} {
		if got := m.matches(strings.ToLower(id)); got != want {
			t.Errorf("%s matches %v, want %v", id, got, want)
		}
	}
}

// Find remembers at most maxRemembered lookups: model names come from
// spans, and a client may send any number of them.
func TestFindRemembersABoundedNumber(t *testing.T) {
	tab := fixture(t)
	for i := range maxRemembered + 100 {
		tab.Find("openai", fmt.Sprintf("unknown-%d", i), noon)
	}
	if n := len(tab.found); n != maxRemembered {
		t.Errorf("%d lookups remembered, want %d", n, maxRemembered)
	}
	if f, ok := tab.Find("openai", "gpt-4o", noon); !ok || f.ID() != "openai/gpt-4o" {
		t.Errorf("past the bound, Find still answers: %v %v", f.ID(), ok)
	}
}

// A model id with capital letters is priced as its lowercase spelling,
// by a regex rule too, as genai-prices does (its calcPrice and
// Provider.find_model lower the id before every rule). Found by a review:
// a dated id matched by a regex alone went unpriced.
func TestRegexMatchesTheLowercasedModelID(t *testing.T) {
	tab := Embedded()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ provider, model, want string }{
		{"anthropic", "Claude-Opus-5-20261101", "anthropic/claude-opus-5"},
		{"x_ai", "Grok-4.5-20261001", "x-ai/grok-4.5"},
		{"", "Claude-Opus-5-20261101", "anthropic/claude-opus-5"}, // provider from the model
	} {
		// The lowercase spelling is found: the data has the model.
		if f, ok := tab.Find(c.provider, strings.ToLower(c.model), at); !ok || f.ID() != c.want {
			t.Fatalf("Find(%q, lowercase %q) = %v %v, want %s", c.provider, c.model, f.ID(), ok, c.want)
		}
		f, ok := tab.Find(c.provider, c.model, at)
		if !ok {
			t.Errorf("Find(%q, %q): no price, want %s (genai-prices lowercases the id before every match, regex included)", c.provider, c.model, c.want)
			continue
		}
		if f.ID() != c.want {
			t.Errorf("Find(%q, %q) = %s, want %s", c.provider, c.model, f.ID(), c.want)
		}
	}
}

// Reasoning tokens cost their own price only where the model has one;
// else all output costs the output price. A count of reasoning tokens
// above the output (a bogus span) is capped at the output: no token is
// charged twice.
func TestCostReasoningTokens(t *testing.T) {
	tab := Embedded()
	find := func(provider, model string) Prices {
		f, ok := tab.Find(provider, model, noon)
		if !ok {
			t.Fatalf("no price for %s/%s", provider, model)
		}
		return f.Prices
	}
	deep, gpt := find("perplexity", "sonar-deep-research"), find("openai", "gpt-4o")
	for _, c := range []struct {
		name   string
		p      Prices
		u      Usage
		output int64 // pico-dollars
	}{
		{"own price", deep, Usage{Output: 1000, Reasoning: 600}, 400*8_000_000 + 600*3_000_000},
		{"capped at the output", deep, Usage{Output: 1000, Reasoning: 5000}, 1000 * 3_000_000},
		{"no reasoning price", gpt, Usage{Output: 1000, Reasoning: 600}, 1000 * 10_000_000},
	} {
		got, err := c.p.Cost(c.u)
		if err != nil || got.Output != c.output {
			t.Errorf("%s: output cost %d (%v), want %d", c.name, got.Output, err, c.output)
		}
	}
}

// A provider the data does not know (a self-hosted server: ollama, vllm)
// names where the model ran; genai-prices then has no price for it:
// calcPrice (packages/js/src/api.ts) calls matchProvider with the
// providerId, and matchProvider (packages/js/src/engine.ts) returns
// findProviderById's answer — undefined — without trying the providers'
// model_match, which it uses only when no providerId is given (or for
// "litellm"). Neither does tracelake: a local deepseek-r1 is not priced
// as DeepSeek's API.
func TestUnknownProviderIsNotPricedByModelMatch(t *testing.T) {
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
	// LiteLLM, a proxy, names no provider of its own: the model finds it.
	if f, ok := tab.Find("litellm", "gpt-4o", at); !ok || f.ID() != "openai/gpt-4o" {
		t.Errorf("Find(litellm, gpt-4o) = %v %s, want openai/gpt-4o", ok, f.ID())
	}
}

// LiteLLM names a model with its provider as a prefix ("openai/gpt-4o");
// when a span's provider is "litellm", genai-prices' calcPrice
// (packages/js/src/api.ts, as in @pydantic/genai-prices 0.1.8's
// dist/index.js) takes the prefix as the provider when the data knows it
// and prices the rest of the name there; only a name without a known
// prefix goes to the providers' model_match. The answers below are the
// package's own (calcPrice of a million input and output tokens at noon,
// 2026-11-30).
func TestLiteLLMModelPrefixNamesTheProvider(t *testing.T) {
	tab := Embedded()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		provider, model string
		modelID         string // "": no price
		input, output   int64  // micro-dollars per million tokens
	}{
		{"litellm", "openai/gpt-4o", "gpt-4o", 2_500_000, 10_000_000},
		{"LiteLLM", "OpenAI/GPT-4o", "gpt-4o", 2_500_000, 10_000_000},
		{"litellm", "azure/gpt-4o", "gpt-4o", 2_500_000, 10_000_000},
		{"litellm", "deepseek/deepseek-chat", "deepseek-chat", 270_000, 1_100_000},
		{"litellm", "vertex_ai/gemini-2.5-pro", "gemini-2.5-pro", 2_500_000, 15_000_000},
		// Cursor's grok-4.6, not xAI's at twice its price.
		{"litellm", "cursor/grok-4.6", "grok-4.6", 2_000_000, 6_000_000},
		{"litellm", "openrouter/anthropic/claude-3.5-sonnet", "anthropic/claude-3.5-sonnet", 3_000_000, 15_000_000},
		{"litellm", "gpt-4o", "gpt-4o", 2_500_000, 10_000_000}, // no prefix: model_match
		{"litellm", "openai/no-such-model", "", 0, 0},
		{"litellm", "unknown/gpt-4o", "", 0, 0},
	}
	for _, c := range cases {
		f, ok := tab.Find(c.provider, c.model, at)
		if c.modelID == "" {
			if ok {
				t.Errorf("Find(%q, %q) = %s, want no price", c.provider, c.model, f.ID())
			}
			continue
		}
		if !ok {
			t.Errorf("Find(%q, %q): no price, want %s", c.provider, c.model, c.modelID)
			continue
		}
		cost, _ := f.Prices.Cost(Usage{Input: 1_000_000, Output: 1_000_000})
		if f.Model.ID != c.modelID || cost.Input != c.input*1_000_000 || cost.Output != c.output*1_000_000 {
			t.Errorf("Find(%q, %q) = %s costing %s + %s for a million tokens each, want %s costing %s + %s",
				c.provider, c.model, f.ID(), Decimal(cost.Input), Decimal(cost.Output), c.modelID, Decimal(c.input*1_000_000), Decimal(c.output*1_000_000))
		}
	}
}
