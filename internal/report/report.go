// Package report turns genai_operations into one self-contained HTML page:
// tokens and cost by model and day, latency percentiles and error rates by
// operation, top tools and agents, the most expensive traces. Charts are
// inline SVG; the page loads nothing from the network.
package report

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Options say what to report on.
type Options struct {
	Table string        // genai_operations table (unquoted name)
	Since time.Duration // window before Now; 0 for everything
	// Tenant, if not "", limits the report to that tenant's operations
	// (tenant_id); every tenant's otherwise.
	Tenant string
	Now    time.Time
}

// Report is the data of the page.
type Report struct {
	Table     string
	Since     time.Duration
	Tenant    string // "" for every tenant
	Generated time.Time

	Operations, Errors, Unpriced int64
	InputTokens, OutputTokens    int64
	CostUSD                      string // exact decimal text

	Days   []string     // the days with operations, ascending (YYYY-MM-DD)
	Models []ModelUsage // by cost, descending
	// ByDay are each model's cost and tokens per day.
	ByDay       []ModelDay
	ByOperation []OperationStats
	Tools       []NamedStats
	Agents      []NamedStats
	Traces      []TraceCost
}

// ModelUsage is one model's totals.
type ModelUsage struct {
	Model                                string
	Operations                           int64
	InputTokens, OutputTokens, CacheRead int64
	CostUSD                              float64
	CostText                             string
}

// ModelDay is one model's use on one day.
type ModelDay struct {
	Day, Model string
	CostUSD    float64
	Tokens     int64
}

// OperationStats are one operation's latency and errors.
type OperationStats struct {
	Operation     string
	Count, Errors int64
	P50, P90, P99 float64 // milliseconds
}

// ErrorRate is the share of the operation's spans that failed.
func (o OperationStats) ErrorRate() float64 {
	if o.Count == 0 {
		return 0
	}
	return float64(o.Errors) / float64(o.Count)
}

// NamedStats are a tool's or an agent's calls.
type NamedStats struct {
	Name          string
	Count, Errors int64
	P50           float64
}

// TraceCost is one trace's operations and cost.
type TraceCost struct {
	Tenant, TraceID, Service, Models string
	Operations                       int64
	Tokens                           int64
	CostUSD                          string
}

// Build queries the table (DuckDB SQL).
func Build(ctx context.Context, conn *sql.DB, opt Options) (*Report, error) {
	return build(ctx, conn, opt, rollUp)
}

// build is Build with the rollups and the wrapper rule of rollUp (a test
// compares them with a reference).
func build(ctx context.Context, conn *sql.DB, opt Options, rollUp func(context.Context, *sql.Tx) error) (*Report, error) {
	// One snapshot for every figure: loads commit beside a report built
	// through a running process, and totals counted before a load would
	// disagree with the models' figures counted after it.
	db, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("report on %s: %w", opt.Table, err)
	}
	defer db.Rollback() //nolint:errcheck // read only
	r := &Report{Table: opt.Table, Since: opt.Since, Tenant: opt.Tenant, Generated: opt.Now.UTC()}
	t := sqltext.Name(opt.Table)
	// A window takes the operations that started in it; the report of
	// everything (Since 0) takes those without a start time too (OTLP's
	// unset 0, stored null): left out, their usage and cost were lost.
	where := "true"
	if opt.Since > 0 {
		where = fmt.Sprintf("start_time >= TIMESTAMP '%s'", opt.Now.UTC().Add(-opt.Since).Format("2006-01-02 15:04:05.000000"))
	}
	if opt.Tenant != "" {
		where += " AND tenant_id = " + sqltext.String(opt.Tenant)
	}
	// A client that retried an export after a lost answer sent its spans
	// twice (OTLP has no request id): each operation counts once, by its
	// span, whatever the copies.
	//
	// The operations are worked out once, into a temporary table of this
	// transaction (its rollback drops it), and every figure is read from
	// it: computed in each of the page's queries, the rollup took most of
	// the report's time (20 s for 200,000 operations, BenchmarkReportLargeWindow).
	// It holds the columns the page shows (not the messages, which
	// capture_content makes long). The rollups and the wrapper rule then
	// null or drop rows of it (rollUp, walk.go).
	if _, err := db.ExecContext(ctx, "CREATE OR REPLACE TEMPORARY TABLE "+opsTable+" AS SELECT "+reportColumns+" FROM "+t+" WHERE "+where+
		" QUALIFY row_number() OVER (PARTITION BY tenant_id, trace_id, span_id, "+contentKey+" ORDER BY ktopic, kpartition, koffset, kindex) = 1"); err != nil {
		return nil, fmt.Errorf("report on %s: %w", opt.Table, err)
	}
	if err := rollUp(ctx, db); err != nil {
		return nil, fmt.Errorf("report on %s: %w", opt.Table, err)
	}
	from := " FROM " + opsTable + " AS operations WHERE true"
	// A model is the one that answered, else the one asked for.
	const model = "coalesce(response_model, request_model, '(none)')"

	if err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'error'),
		count(*) FILTER (WHERE total_cost_usd IS NULL AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL)),
		`+tokens("input_tokens")+`, `+tokens("output_tokens")+`, coalesce(sum(total_cost_usd), 0)::VARCHAR`+from).
		Scan(&r.Operations, &r.Errors, &r.Unpriced, &r.InputTokens, &r.OutputTokens, &r.CostUSD); err != nil {
		return nil, fmt.Errorf("report on %s: %w", opt.Table, err)
	}
	err = query(ctx, db, `SELECT `+model+`, count(*), `+tokens("input_tokens")+`, `+tokens("output_tokens")+`,
		`+tokens("cache_read_tokens")+`, coalesce(sum(total_cost_usd), 0)::DOUBLE, coalesce(sum(total_cost_usd)::VARCHAR, '')`+from+`
		AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL) GROUP BY 1 ORDER BY 6 DESC, 1`,
		func(s scanner) error {
			var m ModelUsage
			if err := s.Scan(&m.Model, &m.Operations, &m.InputTokens, &m.OutputTokens, &m.CacheRead, &m.CostUSD, &m.CostText); err != nil {
				return err
			}
			r.Models = append(r.Models, m)
			return nil
		})
	if err == nil {
		// An operation without a start time has no day to be drawn on.
		err = query(ctx, db, `SELECT strftime(start_time, '%Y-%m-%d'), `+model+`, coalesce(sum(total_cost_usd), 0)::DOUBLE,
			`+tokens("total_tokens")+from+` AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL) AND start_time IS NOT NULL
			GROUP BY 1, 2 ORDER BY 1, 2`,
			func(s scanner) error {
				var d ModelDay
				if err := s.Scan(&d.Day, &d.Model, &d.CostUSD, &d.Tokens); err != nil {
					return err
				}
				r.ByDay = append(r.ByDay, d)
				return nil
			})
	}
	if err == nil {
		err = query(ctx, db, `SELECT coalesce(operation, '(none)'), count(*), count(*) FILTER (WHERE status = 'error'),
			coalesce(quantile_cont(duration_ms, 0.5), 0), coalesce(quantile_cont(duration_ms, 0.9), 0), coalesce(quantile_cont(duration_ms, 0.99), 0)`+
			from+` GROUP BY 1 ORDER BY 2 DESC, 1`,
			func(s scanner) error {
				var o OperationStats
				if err := s.Scan(&o.Operation, &o.Count, &o.Errors, &o.P50, &o.P90, &o.P99); err != nil {
					return err
				}
				r.ByOperation = append(r.ByOperation, o)
				return nil
			})
	}
	for _, named := range []struct {
		column string
		into   *[]NamedStats
	}{{"tool_name", &r.Tools}, {"agent_name", &r.Agents}} {
		if err != nil {
			break
		}
		err = query(ctx, db, `SELECT `+named.column+`, count(*), count(*) FILTER (WHERE status = 'error'),
			coalesce(quantile_cont(duration_ms, 0.5), 0)`+from+` AND `+named.column+` IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10`,
			func(s scanner) error {
				var n NamedStats
				if err := s.Scan(&n.Name, &n.Count, &n.Errors, &n.P50); err != nil {
					return err
				}
				*named.into = append(*named.into, n)
				return nil
			})
	}
	if err == nil {
		err = query(ctx, db, `SELECT tenant_id, trace_id, coalesce(min(service_name), ''), coalesce(string_agg(DISTINCT coalesce(response_model, request_model), ', ' ORDER BY coalesce(response_model, request_model)), ''),
			count(*), `+tokens("total_tokens")+`, sum(total_cost_usd)::VARCHAR`+from+` AND trace_id IS NOT NULL
			GROUP BY 1, 2 HAVING sum(total_cost_usd) > 0 ORDER BY sum(total_cost_usd) DESC, 2 LIMIT 10`,
			func(s scanner) error {
				var c TraceCost
				if err := s.Scan(&c.Tenant, &c.TraceID, &c.Service, &c.Models, &c.Operations, &c.Tokens, &c.CostUSD); err != nil {
					return err
				}
				r.Traces = append(r.Traces, c)
				return nil
			})
	}
	if err != nil {
		return nil, fmt.Errorf("report on %s: %w", opt.Table, err)
	}
	days := map[string]bool{}
	for _, d := range r.ByDay {
		days[d.Day] = true
	}
	for d := range days {
		r.Days = append(r.Days, d)
	}
	sort.Strings(r.Days)
	return r, nil
}

// tokens is the sum of a token column as a BIGINT, 0 for none. DuckDB
// sums BIGINT as HUGEINT: counts are kept as sent, and bogus ones near
// 2⁶³ sum past the int64 the report scans, which failed the whole page
// (every tenant's, the status page's too). Such a sum is clamped to the
// int64 range: no real usage comes near it. The sum of no counts (null)
// is 0 before the clamp: DuckDB's least and greatest skip a null
// argument, which made it the range's end.
func tokens(column string) string {
	return "greatest(least(coalesce(sum(" + column + "), 0), 9223372036854775807), -9223372036854775807)::BIGINT"
}

// usage are the columns of an operation's usage the report sums.
var usage = []string{"input_tokens", "output_tokens", "total_tokens", "cache_read_tokens", "total_cost_usd"}

// reportColumns are the columns of genai_operations the report reads.
var reportColumns = strings.Join(append([]string{"tenant_id", "trace_id", "span_id", "parent_span_id", "start_time", "duration_ms",
	"service_name", "operation", "request_model", "response_model", "tool_name", "agent_name", "status"}, usage...), ", ")

// aggregateOperations are the operations that sum their model calls'
// usage (an agent's run, a chain or workflow of calls), as SQL strings.
var aggregateOperations = "'invoke_agent', 'chain', 'workflow', 'task'"

// wrapModel is the model a wrapper and its call are compared by (Build):
// the one asked for, else the one that answered.
func wrapModel(alias string) string {
	return "coalesce(" + alias + ".request_model, " + alias + ".response_model)"
}

// opsTable is the temporary table of a report's operations (Build).
const opsTable = "tracelake_report_operations"

// contentKey tells apart the operations of spans without a span id (all
// zero in OTLP, stored null), which (tenant_id, trace_id, span_id) cannot:
// PARTITION BY puts every null together, and such operations of one trace
// counted as one. They are identified by their content, as the dedup
// model identifies log records (internal/merge/dedup.go), so a client's
// retry of one still counts once; the cost, price and message columns are
// left out, as they depend on the prices and genai.capture_content of the
// process that loaded each copy, not on the span. Null for a span with an
// id, which its ids identify.
var contentKey = func() string {
	loadedBy := map[string]bool{"price_id": true, "price_match": true, "input_messages": true, "output_messages": true}
	var fields []string
	for _, c := range genai.Table.Columns {
		if c.Type != schema.Decimal && !loadedBy[c.Name] {
			fields = append(fields, sqltext.Ident(c.Name)+" := "+sqltext.Ident(c.Name))
		}
	}
	return "CASE WHEN span_id IS NULL THEN md5(to_json(struct_pack(" + strings.Join(fields, ", ") + "))) END"
}()

type scanner interface{ Scan(dest ...any) error }

func query(ctx context.Context, db *sql.Tx, q string, each func(scanner) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
