// Package examples holds the example configurations shipped with
// tracelake, embedded so that the demo runs exactly what the README shows.
package examples

import _ "embed"

// AgentTraces is examples/agent-traces.yaml.
//
//go:embed agent-traces.yaml
var AgentTraces []byte

// DailyTokenUsage is the daily token-usage-by-model table of the agent
// traces, as a view over the spans model: always exact, and cheap to
// compute at the size of one day's spans.
const DailyTokenUsage = `CREATE OR REPLACE VIEW daily_token_usage AS
SELECT start_time::DATE AS day, model, count(*) AS spans, sum(prompt_tokens) AS prompt_tokens,
       sum(completion_tokens) AS completion_tokens, sum(total_tokens) AS total_tokens, sum(cost_usd) AS cost_usd
FROM trace_spans WHERE model IS NOT NULL GROUP BY ALL`
