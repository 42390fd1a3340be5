// Package prices prices LLM operations from the genai-prices database
// (MIT, github.com/pydantic/genai-prices), exported from its npm package
// @pydantic/genai-prices by scripts/export-genai-prices.sh and embedded.
// Matching follows the package's own rules (its dist/index.js: findProvider,
// the model match, price selection by time and tiered prices): providers by
// id or provider_match, models by equals / starts_with / ends_with /
// contains / regex / and / or on the lowercased id, a dated suffix
// (-20250514) retried as -2025-05-14, fallback providers, prices chosen by
// start date or time of day, tiers by the total input tokens.
//
// Costs are exact: a price of p dollars per million tokens is held as
// p·10⁶ integer micro-dollars per million tokens, which is pico-dollars per
// token, so a cost in pico-dollars is one integer product.
package prices

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed genai-prices.json
var embedded []byte

// Embedded returns the price table built into this binary.
func Embedded() *Table {
	t, err := Parse(embedded)
	if err != nil {
		panic("BUG: the embedded price table does not parse: " + err.Error())
	}
	return t
}

// EmbeddedJSON is the export built into this binary, as exported.
func EmbeddedJSON() []byte { return embedded }

// Table is a price database.
type Table struct {
	Source    string     `json:"source"`
	License   string     `json:"license"`
	Exported  string     `json:"exported"`
	Providers []Provider `json:"providers"`
	// Skipped counts models whose match cannot be used here (a regex Go
	// does not accept): they never match.
	Skipped int `json:"-"`
	// found remembers each Find's model by (provider, model), up to
	// maxRemembered (model names come from spans: a client sending a new
	// one each time must not grow it without bound). A map under a lock,
	// not a sync.Map: that boxes each key, an allocation per span priced.
	mu    sync.RWMutex
	found map[lookupKey]lookup
}

// Provider is one provider of models.
type Provider struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	ProviderMatch *Match   `json:"provider_match"`
	ModelMatch    *Match   `json:"model_match"`
	Fallbacks     []string `json:"fallback_model_providers"`
	Models        []Model  `json:"models"`
}

// Model is one model and its prices over time.
type Model struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Match      Match  `json:"match"`
	Deprecated bool   `json:"deprecated"`
	// Prices are the model's prices, in the order the data gives them; a
	// price without a constraint applies when no other does.
	Prices []Conditional `json:"-"`
}

// Conditional is a model's prices from a start date, or during a time of
// day (UTC), or always.
type Conditional struct {
	Prices Prices
	// start applies from a date (hasStart), or from..to the window of
	// the day in seconds after midnight UTC (timed; to < from wraps).
	start           time.Time
	from, to        int
	hasStart, timed bool
}

// Prices are what one million tokens (one thousand requests) of each kind
// cost. A zero Price with Set false is absent from the data.
type Prices struct {
	Input, CacheRead, CacheWrite, Output, Requests Price
	// OutputReasoning is the price of reasoning tokens where the model
	// prices them apart from the rest of its output.
	OutputReasoning Price
}

// Price is one price: a base and optional tiers chosen by the total input
// tokens of the operation. Values are micro-dollars per million tokens
// (pico-dollars per token); Requests is micro-dollars per thousand requests.
type Price struct {
	Set   bool
	Base  int64
	Tiers []Tier // by Start ascending
}

// Tier is a price applying when the operation's input tokens exceed Start.
type Tier struct {
	Start int64
	Price int64
}

// at is the price for an operation of input total input tokens: the last
// tier whose start it passes, or the base.
func (p Price) at(input int64) int64 {
	v := p.Base
	for _, t := range p.Tiers {
		if input > t.Start {
			v = t.Price
		}
	}
	return v
}

// Match is genai-prices' match logic: exactly one field is set.
type Match struct {
	Equals     *string `json:"equals"`
	StartsWith *string `json:"starts_with"`
	EndsWith   *string `json:"ends_with"`
	Contains   *string `json:"contains"`
	Regex      *string `json:"regex"`
	And        []Match `json:"and"`
	Or         []Match `json:"or"`
	re         *regexp.Regexp
	// not is a leading negative lookahead of the regex, which Go's
	// regexp lacks: the id must not match it.
	not *regexp.Regexp
	// text is the lowercased text of equals, starts_with, ends_with or
	// contains, lowered once (compile).
	text string
}

// matches reports whether id (lowercased already) matches: as in the
// package, every clause, a regex too, is given the lowercased id
// (genai-prices' Provider.find_model and calcPrice lower it first).
func (m *Match) matches(id string) bool {
	switch {
	case m.Or != nil:
		for i := range m.Or {
			if m.Or[i].matches(id) {
				return true
			}
		}
		return false
	case m.And != nil:
		for i := range m.And {
			if !m.And[i].matches(id) {
				return false
			}
		}
		return true
	case m.Equals != nil:
		return id == m.text
	case m.StartsWith != nil:
		return strings.HasPrefix(id, m.text)
	case m.EndsWith != nil:
		return strings.HasSuffix(id, m.text)
	case m.Contains != nil:
		return strings.Contains(id, m.text)
	case m.Regex != nil:
		return m.re != nil && m.re.MatchString(id) && (m.not == nil || !m.not.MatchString(id))
	}
	return false
}

// compile lowers m's texts and compiles its regexes; it returns how many
// did not compile.
func (m *Match) compile() int {
	for _, text := range []*string{m.Equals, m.StartsWith, m.EndsWith, m.Contains} {
		if text != nil {
			m.text = strings.ToLower(*text)
		}
	}
	bad := 0
	for i := range m.Or {
		bad += m.Or[i].compile()
	}
	for i := range m.And {
		bad += m.And[i].compile()
	}
	if m.Regex != nil {
		var err error
		if m.re, m.not, err = compileRegex(*m.Regex); err != nil {
			m.re = nil // never matches
			return bad + 1
		}
	}
	return bad
}

// compileRegex compiles a JavaScript regex of the export in Go's syntax.
// The one construct the data uses that Go lacks is a negative lookahead at
// the start, "^(?!B)R": it holds where ^B does not match and ^R does.
func compileRegex(expr string) (re, not *regexp.Regexp, err error) {
	if rest, ok := strings.CutPrefix(expr, "^(?!"); ok {
		depth := 1
		for i := 0; i < len(rest); i++ {
			switch rest[i] {
			case '\\':
				i++
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					if not, err = regexp.Compile("^(?:" + rest[:i] + ")"); err != nil {
						return nil, nil, err
					}
					expr = "^" + rest[i+1:]
					i = len(rest)
				}
			}
		}
	}
	re, err = regexp.Compile(expr)
	return re, not, err
}

// Parse reads a price table as scripts/export-genai-prices.sh writes it.
func Parse(data []byte) (*Table, error) {
	var raw struct {
		Source    string `json:"source"`
		License   string `json:"license"`
		Exported  string `json:"exported"`
		Providers []struct {
			Provider
			Models []struct {
				Model
				Prices json.RawMessage `json:"prices"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	if len(raw.Providers) == 0 {
		return nil, errors.New("price table: no providers (want the JSON that scripts/export-genai-prices.sh writes)")
	}
	t := &Table{Source: raw.Source, License: raw.License, Exported: raw.Exported}
	for _, rp := range raw.Providers {
		p := rp.Provider
		p.Models = make([]Model, 0, len(rp.Models))
		for _, rm := range rp.Models {
			m := rm.Model
			var err error
			if m.Prices, err = parseConditionals(rm.Prices); err != nil {
				return nil, fmt.Errorf("price table: provider %s model %s: %w", p.ID, m.ID, err)
			}
			if m.Match.compile() > 0 {
				t.Skipped++
			}
			p.Models = append(p.Models, m)
		}
		for _, mm := range []*Match{p.ProviderMatch, p.ModelMatch} {
			if mm != nil {
				mm.compile()
			}
		}
		t.Providers = append(t.Providers, p)
	}
	return t, nil
}

// parseConditionals reads a model's "prices": one set of prices, or a list
// of {constraint, prices}.
func parseConditionals(data json.RawMessage) ([]Conditional, error) {
	if len(data) > 0 && data[0] != '[' {
		p, err := parsePrices(data)
		return []Conditional{{Prices: p}}, err
	}
	var list []struct {
		Constraint *struct {
			Type      string `json:"type"`
			StartDate string `json:"start_date"`
			StartTime string `json:"start_time"`
			EndTime   string `json:"end_time"`
		} `json:"constraint"`
		Prices json.RawMessage `json:"prices"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	out := make([]Conditional, 0, len(list))
	for _, c := range list {
		p, err := parsePrices(c.Prices)
		if err != nil {
			return nil, err
		}
		cond := Conditional{Prices: p}
		if k := c.Constraint; k != nil {
			switch k.Type {
			case "start_date":
				if cond.start, err = time.Parse(time.DateOnly, k.StartDate); err != nil {
					return nil, fmt.Errorf("start_date: %w", err)
				}
				cond.hasStart = true
			case "time_of_date":
				if cond.from, err = timeOfDay(k.StartTime); err == nil {
					cond.to, err = timeOfDay(k.EndTime)
				}
				if err != nil {
					return nil, err
				}
				cond.timed = true
			default:
				return nil, fmt.Errorf("price constraint %q: want start_date or time_of_date", k.Type)
			}
		}
		out = append(out, cond)
	}
	return out, nil
}

// timeOfDay reads "HH:MM:SS[.fff](Z|±HH:MM)" as seconds after midnight UTC.
func timeOfDay(s string) (int, error) {
	for _, layout := range []string{"15:04:05Z07:00", "15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			_, off := t.Zone()
			return ((t.Hour()*3600+t.Minute()*60+t.Second()-off)%86400 + 86400) % 86400, nil
		}
	}
	return 0, fmt.Errorf("time of day %q: want HH:MM:SS with a zone (Z or ±HH:MM)", s)
}

// priceKeys are the data's keys tracelake prices by; the others (audio,
// images, web searches, one-hour cache writes) need usage that spans do not
// report and are left out of the cost. Reasoning tokens are reported
// (gen_ai.usage.reasoning.output_tokens and the conventions' equivalents).
var priceKeys = map[string]func(*Prices) *Price{
	"output_reasoning_mtok": func(p *Prices) *Price { return &p.OutputReasoning },
	"input_mtok":            func(p *Prices) *Price { return &p.Input },
	"cache_read_mtok":       func(p *Prices) *Price { return &p.CacheRead },
	"cache_write_mtok":      func(p *Prices) *Price { return &p.CacheWrite },
	"output_mtok":           func(p *Prices) *Price { return &p.Output },
	"requests_kcount":       func(p *Prices) *Price { return &p.Requests },
}

func parsePrices(data json.RawMessage) (Prices, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Prices{}, err
	}
	var out Prices
	for key, v := range raw {
		field, ok := priceKeys[key]
		if !ok {
			continue
		}
		p, err := parsePrice(v)
		if err != nil {
			return Prices{}, fmt.Errorf("%s: %w", key, err)
		}
		*field(&out) = p
	}
	return out, nil
}

// parsePrice reads a number or {base, tiers: [{start, price}]}.
func parsePrice(data json.RawMessage) (Price, error) {
	var n json.Number
	if err := json.Unmarshal(data, &n); err == nil {
		v, err := micros(n)
		return Price{Set: true, Base: v}, err
	}
	var tiered struct {
		Base  json.Number `json:"base"`
		Tiers []struct {
			Start int64       `json:"start"`
			Price json.Number `json:"price"`
		} `json:"tiers"`
	}
	if err := json.Unmarshal(data, &tiered); err != nil {
		return Price{}, fmt.Errorf("want a number or {base, tiers}: %w", err)
	}
	base, err := micros(tiered.Base)
	if err != nil {
		return Price{}, err
	}
	p := Price{Set: true, Base: base}
	for _, t := range tiered.Tiers {
		v, err := micros(t.Price)
		if err != nil {
			return Price{}, err
		}
		p.Tiers = append(p.Tiers, Tier{Start: t.Start, Price: v})
	}
	slices.SortFunc(p.Tiers, func(a, b Tier) int { return int(a.Start - b.Start) })
	return p, nil
}

// micros converts dollars to micro-dollars, rounding away the binary
// noise the export carries (0.18000000000000002).
func micros(n json.Number) (int64, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f > 1e9 {
		return 0, fmt.Errorf("price %q: want a non-negative number of dollars", n)
	}
	return int64(math.Round(f * 1e6)), nil
}

// How a model was found, as genai_operations.price_match says.
const (
	MatchExact      = "exact"      // the model id as the span gives it
	MatchNormalised = "normalised" // after removing a provider prefix or dating the suffix
	MatchAlias      = "alias"      // through another provider (a fallback, or found by the model)
)

// Found is a model's price found for an operation.
type Found struct {
	Provider *Provider
	Model    *Model
	Prices   Prices
	How      string // MatchExact, MatchNormalised or MatchAlias
	id       string // ID's, when Find remembered it
}

// ID is the price's id, provider/model.
func (f Found) ID() string {
	if f.id != "" {
		return f.id
	}
	return f.Provider.ID + "/" + f.Model.ID
}

// providerIDs maps the OpenTelemetry gen_ai.provider.name values to the
// database's provider ids where they differ.
var providerIDs = map[string]string{
	"azure.ai.openai": "azure", "azure.ai.inference": "azure",
	"gcp.vertex_ai": "google", "gcp.gemini": "google", "gcp.gen_ai": "google",
	"aws.bedrock": "aws", "x_ai": "x-ai", "mistral_ai": "mistral", "ibm.watsonx.ai": "ibm",
	"moonshot_ai": "moonshotai",
}

// proxies are the provider names that name no provider of their own:
// proxies in front of others, naming a model with its provider as a
// prefix ("openai/gpt-4o") — LiteLLM, and the Vercel AI SDK's AI Gateway,
// whose language model's provider is "gateway" (vercel/ai,
// packages/gateway/src/gateway-provider.ts) and whose model ids are
// "<provider>/<model>" (GatewayModelId), and which Pydantic AI's
// VercelProvider names "vercel" (pydantic_ai/providers/vercel.py) — and
// an agent framework writing
// its own name there: Strands Agents' "strands-agents"
// (strands-agents/sdk-python, src/strands/telemetry/tracer.py,
// _get_common_attributes), whatever model it calls. The prefix is the
// provider when the data knows it; else the model finds one, as for a
// span naming no provider.
var proxies = map[string]bool{"litellm": true, "gateway": true, "vercel": true, "strands-agents": true}

// bedrockModelID is a Bedrock model or inference-profile id: an optional
// inference-profile (or foundation-model) ARN, an optional cross-region
// prefix (us., eu., apac., global., us-gov., …), then the model's vendor
// and a dot ("anthropic.claude-sonnet-4-6",
// "us.anthropic.claude-sonnet-4-20250514-v1:0"). The vendors are those of
// Bedrock's model ids.
var bedrockModelID = regexp.MustCompile(`^(?:arn:aws[a-z-]*:bedrock:[^/]*/)?(?:[a-z]{2,6}(?:-gov)?\.)?` +
	`(?:` + strings.Join(bedrockVendors, "|") + `)\.[a-z0-9]`)

// bedrockVendors begin Bedrock's model ids ("amazon.nova-pro-v1:0").
var bedrockVendors = []string{"anthropic", "amazon", "meta", "mistral", "cohere", "ai21", "deepseek", "qwen", "openai",
	"writer", "google", "nvidia", "twelvelabs", "stability", "moonshot", "moonshotai", "minimax", "zai"}

// BedrockModel reports whether model is a Bedrock model id: a call of it
// ran on Bedrock, whatever provider its span names. Claude Code on
// Bedrock (CLAUDE_CODE_USE_BEDROCK) names its spans anthropic's and its
// model an inference profile ("apac.anthropic.claude-3-7-sonnet-20250219-v1:0");
// Strands Agents names none but its own, and its default model is
// Bedrock's ("global.anthropic.claude-sonnet-4-6").
func BedrockModel(model string) bool {
	return bedrockModelID.MatchString(strings.ToLower(strings.TrimSpace(model)))
}

// Find returns the price of model from provider (a gen_ai.provider.name
// value, or "") at time at. Which model a (provider, model) pair finds is
// kept: spans name few distinct models, and matching walks hundreds.
func (t *Table) Find(provider, model string, at time.Time) (Found, bool) {
	key := lookupKey{provider, model}
	t.mu.RLock()
	l, ok := t.found[key]
	t.mu.RUnlock()
	if ok {
		if l.model == nil {
			return Found{}, false
		}
		return Found{Provider: l.provider, Model: l.model, Prices: l.model.PricesAt(at), How: l.how, id: l.id}, true
	}
	f, ok := t.find(provider, model, at)
	if ok {
		f.id = f.ID()
	}
	t.mu.Lock()
	if t.found == nil {
		t.found = map[lookupKey]lookup{}
	}
	if len(t.found) < maxRemembered {
		t.found[key] = lookup{f.Provider, f.Model, f.How, f.id}
	}
	t.mu.Unlock()
	return f, ok
}

// maxRemembered bounds the (provider, model) pairs Find remembers.
const maxRemembered = 10_000

// lookupKey and lookup are a remembered Find.
type (
	lookupKey struct{ provider, model string }
	lookup    struct {
		provider *Provider
		model    *Model // nil: no price
		how, id  string
	}
)

func (t *Table) find(provider, model string, at time.Time) (Found, bool) {
	model = strings.TrimSpace(model)
	if model == "" {
		return Found{}, false
	}
	lower := strings.ToLower(model)
	var p *Provider
	how := MatchExact
	id := strings.ToLower(strings.TrimSpace(provider))
	proxy := proxies[id]
	if proxy {
		// LiteLLM, a proxy, names its model with the provider as a
		// prefix ("openai/gpt-4o"). genai-prices' calcPrice
		// (packages/js/src/api.ts) takes that prefix as the provider
		// when the data knows it, and the rest as the model there; the
		// providers' model_match only sees a name without a known
		// prefix. Matched on the full name instead, "openai/gpt-4o"
		// found no provider, and "cursor/grok-4.6" found xAI's price.
		if prefix, rest, ok := strings.Cut(lower, "/"); ok && prefix != "" && rest != "" {
			if pp := t.provider(prefix); pp != nil {
				p, model, lower, how = pp, rest, rest, MatchNormalised
			}
		}
	}
	if p == nil && id != "" {
		if mapped, ok := providerIDs[id]; ok {
			id = mapped
		}
		p = t.provider(id)
	}
	// A Bedrock model id on a span naming no provider (or a proxy or
	// framework) ran on Bedrock: Bedrock's price, not the model_match
	// of its vendor's API (claude → anthropic), which has no such id.
	if p == nil && (id == "" || proxy) && BedrockModel(model) {
		p = t.provider(providerIDs["aws.bedrock"])
	}
	// A provider the data does not know (a self-hosted ollama or vllm)
	// has no price: the model ran there, not at the API whose model_match
	// takes its name. Only without a provider is the provider found by
	// the model (claude → anthropic), as genai-prices' matchProvider
	// (packages/js/src/engine.ts) does — and, as there, for "litellm",
	// a proxy in front of any provider.
	if p == nil && (id == "" || proxy) {
		for i := range t.Providers {
			if mm := t.Providers[i].ModelMatch; mm != nil && mm.matches(lower) {
				p, how = &t.Providers[i], MatchAlias
				break
			}
		}
	}
	if p == nil {
		return Found{}, false
	}
	cands := candidates(model)
	if p.ID == providerIDs["aws.bedrock"] && !BedrockModel(model) {
		// A Bedrock model named without its vendor, as OpenLLMetry's
		// Bedrock instrumentation writes it (_get_vendor_model:
		// "us.amazon.nova-pro-v1:0" → "nova-pro-v1:0"): tried with
		// each vendor of Bedrock's ids after the name as written.
		for _, c := range slices.Clone(cands) {
			for _, v := range bedrockVendors {
				cands = append(cands, candidate{id: v + "." + c.id, normalised: true})
			}
		}
	}
	for _, c := range cands {
		m, via := t.model(p, strings.ToLower(c.id))
		if m == nil {
			continue
		}
		if c.normalised && how == MatchExact {
			how = MatchNormalised
		}
		if via != p {
			how = MatchAlias
		}
		return Found{Provider: via, Model: m, Prices: m.PricesAt(at), How: how}, true
	}
	return Found{}, false
}

// provider finds a provider by id, then by its provider_match.
func (t *Table) provider(id string) *Provider {
	for i := range t.Providers {
		if t.Providers[i].ID == id {
			return &t.Providers[i]
		}
	}
	for i := range t.Providers {
		if pm := t.Providers[i].ProviderMatch; pm != nil && pm.matches(id) {
			return &t.Providers[i]
		}
	}
	return nil
}

// model finds the first model of p matching id, then of p's fallback
// providers; it returns the model and the provider that has it.
func (t *Table) model(p *Provider, lower string) (*Model, *Provider) {
	for i := range p.Models {
		if p.Models[i].Match.matches(lower) {
			return &p.Models[i], p
		}
	}
	for _, id := range p.Fallbacks {
		for i := range t.Providers {
			fb := &t.Providers[i]
			if fb.ID != id {
				continue
			}
			for j := range fb.Models {
				if fb.Models[j].Match.matches(lower) {
					return &fb.Models[j], fb
				}
			}
		}
	}
	return nil, nil
}

type candidate struct {
	id         string
	normalised bool
}

// datedSuffix is a -YYYYMMDD date in a model id, which the database often
// spells -YYYY-MM-DD (genai-prices does the same rewrite).
var datedSuffix = regexp.MustCompile(`-(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(-|:|$)`)

// vertexResource is a Vertex AI publisher model's resource name, its model
// the group: "projects/P/locations/L/publishers/PUB/models/M" or
// "publishers/PUB/models/M". Only such a name: another holding "/models/"
// (vLLM's "/mnt/models/gpt-oss-120b", a Fireworks account's
// "accounts/A/models/M") names a self-hosted or custom model, whose cost
// is unknown, not the price of the model its name ends in.
var vertexResource = regexp.MustCompile(`^(?:projects/[^/]+/locations/[^/]+/)?publishers/[^/]+/models/([^/]+)$`)

// candidates are the ids to try for a model, as given first: then without
// a "provider/" prefix (OpenRouter and LiteLLM spell models so), then the
// model of a Vertex AI resource name (vertexResource:
// "projects/p/locations/l/publishers/google/models/gemini-2.5-flash", as
// the API takes a model and OpenInference's Vertex AI instrumentation
// writes it), then each with its date written with dashes.
func candidates(model string) []candidate {
	out := []candidate{{id: model}}
	if _, rest, ok := strings.Cut(model, "/"); ok && rest != "" {
		out = append(out, candidate{id: rest, normalised: true})
	}
	if m := vertexResource.FindStringSubmatch(model); m != nil && m[1] != out[len(out)-1].id {
		out = append(out, candidate{id: m[1], normalised: true})
	}
	for _, c := range slices.Clone(out) {
		if dated := datedSuffix.ReplaceAllString(c.id, "-$1-$2-$3$4"); dated != c.id {
			out = append(out, candidate{id: dated, normalised: true})
		}
	}
	return out
}

// PricesAt selects the prices in effect at t, as genai-prices does: from
// the last conditional backwards, the first whose constraint holds (a
// start date at or before t, t's time of day in the window, or none);
// else the first.
func (m *Model) PricesAt(t time.Time) Prices {
	t = t.UTC()
	day := t.Hour()*3600 + t.Minute()*60 + t.Second()
	for i := len(m.Prices) - 1; i >= 0; i-- {
		c := m.Prices[i]
		switch {
		case c.hasStart:
			if !t.Before(c.start) {
				return c.Prices
			}
		case c.timed:
			if c.to < c.from {
				if day >= c.from || day < c.to {
					return c.Prices
				}
			} else if day >= c.from && day < c.to {
				return c.Prices
			}
		default:
			return c.Prices
		}
	}
	if len(m.Prices) == 0 {
		return Prices{}
	}
	return m.Prices[0].Prices
}

// Usage is an operation's token counts. Input includes the cache reads
// and writes (the OpenTelemetry meaning); Output includes the Reasoning
// tokens.
type Usage struct {
	Input, CacheRead, CacheWrite, Output, Reasoning int64
}

// Cost is what an operation cost, in pico-dollars (10⁻¹² USD). Output
// includes the reasoning tokens' cost (output_cost_usd is the cost of
// output_tokens, which include them), so the parts add up to Total.
type Cost struct {
	Input, CacheRead, CacheWrite, Output, Requests int64
}

// Total is the sum of the parts.
func (c Cost) Total() int64 { return c.Input + c.CacheRead + c.CacheWrite + c.Output + c.Requests }

// MaxCost is the largest cost genai_operations' DECIMAL(18,12) columns
// hold: just under a million dollars, in pico-dollars.
const MaxCost = 1e18 - 1

// Cost prices u. As in genai-prices, cache reads and writes are split out
// of the input only where the model has a price for them (else they cost
// the input price), reasoning tokens are split out of the output only where
// the model has a price for them (else they cost the output price), every
// tiered price takes the tier of the total input tokens, and a model with a
// per-request price charges one request. It fails with ErrCostOutOfRange
// when a part or the total would pass MaxCost (token counts no operation
// has: a bogus attribute): such a cost cannot be stored, and one wrong
// product must not wrap around to a plausible number; and with
// ErrCacheExceedsInput when the cache reads and writes split out of the
// input are more than the input.
func (p Prices) Cost(u Usage) (c Cost, err error) {
	ok := true
	times := func(tokens, price int64) int64 {
		hi, lo := bits.Mul64(uint64(max(tokens, 0)), uint64(max(price, 0)))
		if hi != 0 || lo > MaxCost {
			ok = false
			return 0
		}
		return int64(lo)
	}
	uncached := u.Input
	if p.CacheRead.Set {
		c.CacheRead = times(u.CacheRead, p.CacheRead.at(u.Input))
		uncached -= u.CacheRead
	}
	if p.CacheWrite.Set {
		c.CacheWrite = times(u.CacheWrite, p.CacheWrite.at(u.Input))
		uncached -= u.CacheWrite
	}
	if uncached < 0 {
		// genai-prices' computeLeafValues (packages/js/src/decompose.ts)
		// throws on a priced part larger than the whole: the counts
		// contradict each other (an instrumentation that reports the
		// input without its cache, as Anthropic's API counts it), and
		// charging the input as 0 would be too low and look right.
		return Cost{}, fmt.Errorf("%w: cache reads %d and writes %d, input %d", ErrCacheExceedsInput, u.CacheRead, u.CacheWrite, u.Input)
	}
	c.Input = times(uncached, p.Input.at(u.Input))
	uncachedOutput := u.Output
	if p.OutputReasoning.Set {
		// genai-prices' unit registry (prices/units.yml) makes
		// output_reasoning_tokens a descendant of output_tokens, and
		// computeLeafValues (packages/js/src/decompose.ts) charges
		// output_mtok on the output less the reasoning tokens. It throws
		// when reasoning exceeds output; a span's bogus count is capped
		// at the output instead, so no tokens are charged twice or
		// negatively.
		reasoning := max(min(u.Reasoning, u.Output), 0)
		c.Output = times(reasoning, p.OutputReasoning.at(u.Input))
		uncachedOutput -= reasoning
	}
	c.Output += times(uncachedOutput, p.Output.at(u.Input))
	if p.Requests.Set {
		// Micro-dollars per thousand requests: ×10⁶ to pico, ÷10³ for one.
		c.Requests = times(1000, p.Requests.at(u.Input))
	}
	// Each product is at most MaxCost, so the sum of six cannot overflow.
	if !ok || c.Total() > MaxCost {
		return Cost{}, ErrCostOutOfRange
	}
	return c, nil
}

// The reasons Cost prices nothing.
var (
	ErrCostOutOfRange    = errors.New("the cost is past what the cost columns hold")
	ErrCacheExceedsInput = errors.New("the priced cache tokens are more than the input tokens, which include them")
)

// Decimal formats pico-dollars as dollars with 12 decimals.
func Decimal(pico int64) string {
	var b [24]byte
	return string(AppendDecimal(b[:0], pico))
}

// AppendDecimal appends pico-dollars as dollars with 12 decimals.
func AppendDecimal(dst []byte, pico int64) []byte {
	if pico < 0 {
		dst, pico = append(dst, '-'), -pico
	}
	dst = strconv.AppendInt(dst, pico/1e12, 10)
	dst = append(dst, '.')
	var frac [13]byte // 1 and the 12 digits
	return append(dst, strconv.AppendInt(frac[:0], pico%1e12+1e12, 10)[1:]...)
}

// Load reads the price table at path, or returns the embedded one for ""
// and for a path where no file is yet (`tracelake prices update` writes
// it): its Source then says so.
func Load(path string) (*Table, error) {
	if path == "" {
		return Embedded(), nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t := Embedded()
		t.Source += " (built in: " + path + " does not exist yet)"
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(data)
}
