// Package tracegen makes realistic synthetic LLM-agent trace spans: nested
// spans of one trace, model names, token usage, latency, tool calls and
// unicode text, about 1 KB each. Output is deterministic for a seed.
package tracegen

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tracelake/tracelake/internal/envelope"
)

var (
	models  = []string{"large-model-v3", "large-model-v3-mini", "reasoner-r2", "coder-x1", "embed-small"}
	tools   = []string{"web_search", "code_interpreter", "sql_query", "file_read", "calculator", "retrieve_docs"}
	kinds   = []string{"agent", "llm", "tool", "retrieval"}
	prompts = []string{
		"Summarise the quarterly report and list the three biggest risks.",
		"Écris une fonction qui trie une liste de dictionnaires par date.",
		"请分析这段日志并找出导致超时的根本原因。",
		"Найди в базе заказы за прошлую неделю с суммой больше 1000 ₽.",
		"東京の天気を調べて、明日の予定を提案してください 🌤️",
		"Compare the latency of the two deployments and explain the \"p99\" spike.",
	}
	outputs = []string{
		"Here is the summary:\n1. Revenue grew 12%\n2. Costs rose\n3. Churn is flat.",
		"def trier(liste):\n    return sorted(liste, key=lambda d: d[\"date\"])",
		"根本原因是连接池耗尽（max=32），请求排队超过 30s。",
		"Найдено 42 заказа; крупнейший — 18 400 ₽.",
		"明日は晴れ ☀️ 最高気温 21°C。午前中の散歩がおすすめです。",
		"The p99 spike comes from cold starts after each deploy (≈ 2.3 s).",
	}
)

// firstDay and days place every generated span: its start is a random
// moment of the days days from firstDay (fixed, so a seed gives the same
// spans and prices on every run).
var firstDay = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

const days = 30

// TimeRange is when the generated spans start: the demo tells it, as a
// query over the last hour (Grafana's default) finds none of them.
func TimeRange() (from, to time.Time) { return firstDay, firstDay.AddDate(0, 0, days) }

// Generator makes spans. Not safe for concurrent use.
type Generator struct {
	r       *rand.Rand
	trace   [16]byte
	spans   int // spans left in the current trace
	spanSeq int
	parent  string
	base    time.Time
	ids     *envelope.UUIDs
}

// New returns a generator; the same seed gives the same spans (except ids of
// the UUID form, which are random).
func New(seed uint64) *Generator {
	return &Generator{
		r:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		base: firstDay,
		ids:  envelope.NewUUIDs(),
	}
}

// Key is the Kafka key of the span last appended: its trace id, so all spans
// of a trace land in one partition, in order.
func (g *Generator) Key() []byte { return envelope.AppendUUID(nil, &g.trace) }

// Append appends one span as a JSON object.
func (g *Generator) Append(dst []byte) []byte {
	if g.spans == 0 {
		g.ids.Next(&g.trace)
		g.spans = 3 + g.r.IntN(12)
		g.spanSeq = 0
		g.parent = ""
	}
	g.spans--
	g.spanSeq++
	spanID := "span-" + strconv.Itoa(g.spanSeq)
	kind := kinds[g.r.IntN(len(kinds))]
	if g.spanSeq == 1 {
		kind = "agent"
	}
	model := models[g.r.IntN(len(models))]
	start := g.base.Add(time.Duration(g.r.Int64N(int64(days * 24 * time.Hour))))
	latency := 20 + g.r.IntN(8000)
	prompt := 50 + g.r.IntN(4000)
	completion := 10 + g.r.IntN(1500)

	dst = append(dst, `{"trace_id":"`...)
	dst = envelope.AppendUUID(dst, &g.trace)
	dst = append(dst, `","span_id":"`...)
	dst = append(dst, spanID...)
	dst = append(dst, `","parent_span_id":`...)
	if g.parent == "" {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, g.parent...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, kind...)
	dst = append(dst, `","name":"`...)
	dst = append(dst, kind...)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(g.spanSeq), 10)
	dst = append(dst, `","model":"`...)
	dst = append(dst, model...)
	dst = append(dst, `","start_time":"`...)
	dst = start.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","latency_ms":`...)
	dst = strconv.AppendInt(dst, int64(latency), 10)
	dst = append(dst, `,"first_token_ms":`...)
	dst = strconv.AppendInt(dst, int64(latency/(2+g.r.IntN(6))), 10)
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(completion), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt+completion), 10)
	if g.r.IntN(3) == 0 {
		dst = append(dst, `,"reasoning_tokens":`...)
		dst = strconv.AppendInt(dst, int64(g.r.IntN(3000)), 10)
	}
	dst = append(dst, `,"cost_usd":`...)
	dst = strconv.AppendFloat(dst, float64(prompt+completion)*0.0000021, 'f', 8, 64)
	dst = append(dst, `},"tool_calls":[`...)
	for i := range g.r.IntN(4) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":"`...)
		dst = append(dst, tools[g.r.IntN(len(tools))]...)
		dst = append(dst, `","arguments":{"query":`...)
		dst = envelope.AppendString(dst, firstRunes(prompts[g.r.IntN(len(prompts))], 20))
		dst = append(dst, `,"limit":`...)
		dst = strconv.AppendInt(dst, int64(1+g.r.IntN(50)), 10)
		dst = append(dst, `},"duration_ms":`...)
		dst = strconv.AppendInt(dst, int64(g.r.IntN(2000)), 10)
		dst = append(dst, `,"ok":`...)
		dst = strconv.AppendBool(dst, g.r.IntN(10) != 0)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"input":`...)
	dst = envelope.AppendString(dst, []byte(prompts[g.r.IntN(len(prompts))]))
	dst = append(dst, `,"output":`...)
	dst = envelope.AppendString(dst, []byte(outputs[g.r.IntN(len(outputs))]))
	dst = append(dst, `,"status":"`...)
	if g.r.IntN(20) == 0 {
		dst = append(dst, `error","error":{"type":"timeout","message":"upstream timed out after 30s"}`...)
	} else {
		dst = append(dst, `ok"`...)
	}
	dst = append(dst, `,"attributes":{"harness":"eval-harness-2","env":"prod","region":"eu-west-1","session":"`...)
	dst = strconv.AppendUint(dst, g.r.Uint64(), 36)
	dst = append(dst, `","temperature":0.7,"top_p":0.95,"max_tokens":4096}}`...)
	g.parent = spanID
	return dst
}

// firstRunes returns at most n runes of s, never cutting a character.
func firstRunes(s string, n int) []byte {
	for i := range s {
		if n == 0 {
			return []byte(s[:i])
		}
		n--
	}
	return []byte(s)
}
