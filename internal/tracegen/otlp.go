package tracegen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// llms are the models agent traces call, with their providers as
// gen_ai.provider.name names them: real ids, so that the price table
// prices them; Anthropic's calls read a prompt cache.
var llms = []struct{ provider, model string }{
	{"openai", "gpt-4o-2024-08-06"}, {"openai", "gpt-4o-mini"}, {"anthropic", "claude-sonnet-4-5-20250929"},
	{"anthropic", "claude-3-5-haiku-20241022"}, {"gcp.gemini", "gemini-2.5-flash"},
}

// OTLPTrace returns one agent trace as OTLP, as an SDK exports it: an
// invoke_agent span, under it chat and execute_tool spans with the
// OpenTelemetry GenAI semantic conventions' attributes (token counts as
// ints, temperature as a double, finish reasons as an array), 2 to 8 spans
// in all. The same generator state gives the same trace.
func (g *Generator) OTLPTrace() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr("service.name", "support-agent")
	res.PutStr("deployment.environment.name", "prod")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("tracelake.tracegen")
	ss.Scope().SetVersion("1.0.0")

	g.ids.Next(&g.trace)
	traceID := pcommon.TraceID(g.trace)
	start := g.base.Add(time.Duration(g.r.Int64N(int64(days * 24 * time.Hour))))
	n := 2 + g.r.IntN(7)
	var rootID pcommon.SpanID
	at := start
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(traceID)
		var id pcommon.SpanID
		for j := range id {
			id[j] = byte(g.r.Uint32())
		}
		id[0] |= 1 // never all zero
		s.SetSpanID(id)
		a := s.Attributes()
		llm := llms[g.r.IntN(len(llms))]
		latency := time.Duration(20+g.r.IntN(8000)) * time.Millisecond
		switch {
		case i == 0:
			rootID = id
			s.SetName("invoke_agent support")
			s.SetKind(ptrace.SpanKindInternal)
			a.PutStr("gen_ai.operation.name", "invoke_agent")
			a.PutStr("gen_ai.agent.name", "support")
			a.PutStr("gen_ai.conversation.id", fmt.Sprintf("conv-%d", g.r.IntN(1000)))
			latency = 0 // set below, over its children
		case g.r.IntN(3) == 0:
			tool := tools[g.r.IntN(len(tools))]
			s.SetName("execute_tool " + tool)
			s.SetKind(ptrace.SpanKindInternal)
			a.PutStr("gen_ai.operation.name", "execute_tool")
			a.PutStr("gen_ai.tool.name", tool)
			a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("call_%x", g.r.Uint64()))
		default:
			input, output := 50+g.r.IntN(4000), 10+g.r.IntN(1500)
			s.SetName("chat " + llm.model)
			s.SetKind(ptrace.SpanKindClient)
			a.PutStr("gen_ai.operation.name", "chat")
			a.PutStr("gen_ai.provider.name", llm.provider)
			a.PutStr("gen_ai.request.model", llm.model)
			a.PutStr("gen_ai.response.model", llm.model)
			a.PutInt("gen_ai.usage.input_tokens", int64(input))
			a.PutInt("gen_ai.usage.output_tokens", int64(output))
			if llm.provider == "anthropic" {
				a.PutInt("gen_ai.usage.cache_read.input_tokens", int64(input*g.r.IntN(90)/100))
			}
			a.PutDouble("gen_ai.request.temperature", 0.7)
			a.PutInt("gen_ai.request.max_tokens", 4096)
			a.PutEmptySlice("gen_ai.response.finish_reasons").AppendEmpty().SetStr("stop")
			ev := s.Events().AppendEmpty()
			ev.SetName("gen_ai.user.message")
			ev.SetTimestamp(pcommon.NewTimestampFromTime(at))
			ev.Attributes().PutStr("content", prompts[g.r.IntN(len(prompts))])
		}
		if i > 0 {
			s.SetParentSpanID(rootID)
		}
		if g.r.IntN(20) == 0 {
			s.Status().SetCode(ptrace.StatusCodeError)
			s.Status().SetMessage("upstream timed out after 30s")
			a.PutStr("error.type", "timeout")
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(latency)))
		at = at.Add(latency)
	}
	root := ss.Spans().At(0)
	root.SetEndTimestamp(pcommon.NewTimestampFromTime(at))
	return td
}

// ProduceOTLP writes n messages of one agent trace each to topic, as the
// OpenTelemetry Collector's Kafka exporter does (encoding otlp_proto or
// otlp_json, keyed by trace id), waits until every one is acknowledged,
// and returns the spans they hold.
func ProduceOTLP(ctx context.Context, cl *kgo.Client, topic, encoding string, n int, seed uint64) (spans int, err error) {
	var marshal func(ptrace.Traces) ([]byte, error)
	switch encoding {
	case "otlp_proto":
		marshal = (&ptrace.ProtoMarshaler{}).MarshalTraces
	case "otlp_json":
		marshal = (&ptrace.JSONMarshaler{}).MarshalTraces
	default:
		return 0, fmt.Errorf("encoding %q: want otlp_proto or otlp_json", encoding)
	}
	g := New(seed)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range n {
		td := g.OTLPTrace()
		value, err := marshal(td)
		if err != nil {
			return spans, err
		}
		spans += td.SpanCount()
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: append([]byte(nil), g.trace[:]...), Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return spans, fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	return spans, ctx.Err()
}
