package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/genai/genaitest"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/schema"
)

// The fixtures of every convention, sent as OTLP messages through
// `tracelake run`, come out of genai_operations as the fixtures say, in the
// load of their spans and with their spans' coordinates. Then a price
// update and `merge --rebuild genai_operations` change the costs of the
// repriced model and nothing else.
func TestGenAIOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 2)
	cfgPath := writeConfig(t, cluster, "format: otlp_proto", "genai: {capture_content: true, prices_file: "+
		filepath.Join(t.TempDir(), "prices.json")+"}")
	fixtures := genaitest.Fixtures(t)
	// Several fixtures per message, between ordinary spans, so that an
	// operation's index among its message's rows differs from its span's
	// place among operations.
	const perMessage = 4
	for first := 0; first < len(fixtures); first += perMessage {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "agent")
		for i := first; i < min(first+perMessage, len(fixtures)); i++ {
			f := &fixtures[i]
			// Each in its instrumentation's scope, which the mapping
			// reads too (and a rebuild from otel_spans).
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(f.Span.Scope.Name)
			ss.Scope().SetVersion(f.Span.Scope.Version)
			spans := ss.Spans()
			plain := spans.AppendEmpty()
			plain.SetName("GET /health")
			plain.SetTraceID(pcommon.TraceID{byte(i), 1})
			plain.SetSpanID(pcommon.SpanID{0xee, byte(i)})
			s := spans.AppendEmpty()
			s.SetName(f.Span.Name)
			s.SetTraceID(pcommon.TraceID{byte(i), 1})
			s.SetSpanID(pcommon.SpanID{0xaa, byte(i)})
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(f.Span.Start))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(f.Span.Start.Add(1500 * time.Millisecond)))
			if f.Span.Status == "error" {
				s.Status().SetCode(ptrace.StatusCodeError)
				s.Status().SetMessage(f.Span.StatusMessage)
			}
			f.Attributes(t).CopyTo(s.Attributes())
		}
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: marshalOTLP(t, "otlp_proto", td)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// While it runs, the status page links the report, served from the
	// process's own database; the counters are on /metrics.
	run := startRun(t, bin, cfgPath, "run")
	awaitMetric(t, run, "tracelake_genai_operations_total")
	if page := run.get("/"); !strings.Contains(page, `href="/report"`) {
		t.Errorf("the status page does not link the report:\n%s", page)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		page := run.get("/report?since=all")
		if strings.Contains(page, "GenAI operations") && strings.Contains(page, "claude-sonnet-4-5-20250929") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/report shows no operations after 60s:\n%.3000s", page)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition: the loads
	}
	if m := run.get("/metrics"); !regexp.MustCompile(`tracelake_genai_invalid_values_total\{column="input_tokens"\} [1-9]`).MatchString(m) ||
		!regexp.MustCompile(`(?m)^tracelake_genai_unpriced_total [1-9]`).MatchString(m) {
		t.Errorf("/metrics lacks the mistyped and unpriced operations:\n%s", m)
	}
	if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = run.cmd.Wait()
	rep := runUntilIdle(t, bin, cfgPath)
	if rows, dlq := rep.Totals(); !rep.OK || rows != int64(2*len(fixtures)) || dlq != 0 {
		t.Fatalf("ok=%v rows=%d dlq=%d problems=%v, want %d spans", rep.OK, rows, dlq, rep.Problems, 2*len(fixtures))
	}
	if d := rep.Derived; d == nil || d.Table != "genai_operations" || d.Rows == 0 || d.Duplicates != 0 || d.Orphans != 0 || d.Mismatched != 0 {
		t.Fatalf("verify's check of genai_operations: %+v", d)
	}

	dbPath := filepath.Join(filepath.Dir(cfgPath), "test.duckdb")
	before := operationRows(t, dbPath)
	want := 0
	for i, f := range fixtures {
		got, ok := before[fmt.Sprintf("aa%02x000000000000", i)]
		if f.Want == nil {
			if ok {
				t.Errorf("%s: not a GenAI span, but in genai_operations: %v", f.Name, got)
			}
			continue
		}
		want++
		if !ok {
			t.Errorf("%s: no row", f.Name)
			continue
		}
		if !reflect.DeepEqual(got.columns, f.Want) {
			g, _ := json.Marshal(got.columns)
			w, _ := json.Marshal(f.Want)
			t.Errorf("%s:\n got  %s\n want %s", f.Name, g, w)
		}
		if got.duration != 1500 || got.tenant != "default" || got.service != "agent" || got.name != f.Span.Name {
			t.Errorf("%s: span columns %+v", f.Name, got)
		}
	}
	if len(before) != want {
		t.Errorf("%d operations, want %d", len(before), want)
	}
	db := openDuckDBFile(t, dbPath)
	var unmatched int64
	mustScan(t, db.QueryRow(`SELECT count(*) FROM genai_operations g ANTI JOIN otel_spans s
		ON s.ktopic = g.ktopic AND s.kpartition = g.kpartition AND s.koffset = g.koffset AND s.kindex = g.kindex
		AND s.span_id = g.span_id AND s.trace_id = g.trace_id`), &unmatched)
	if unmatched != 0 {
		t.Errorf("%d operations whose coordinates are not their span's", unmatched)
	}
	db.Close()

	// Double OpenAI's gpt-4o prices, install the table, rebuild.
	repriced := repricedTable(t, "openai", "gpt-4o")
	out, err := exec.Command(bin, "prices", "update", "--config", cfgPath, "--file", repriced).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--rebuild genai_operations") {
		t.Fatalf("prices update: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath, "--rebuild", "genai_operations").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), fmt.Sprintf("%d operations", want)) {
		t.Fatalf("merge --rebuild: %v\n%s", err, out)
	}
	after := operationRows(t, dbPath)
	changed := 0
	for id, b := range before {
		a := after[id]
		if b.columns["price_id"] != "openai/gpt-4o" {
			if !reflect.DeepEqual(a, b) {
				t.Errorf("span %s: not repriced, yet its row changed:\n %+v\n %+v", id, b, a)
			}
			continue
		}
		changed++
		for k, v := range b.columns {
			switch {
			case strings.HasSuffix(k, "_cost_usd"):
				if want := double(t, v.(string)); a.columns[k] != want {
					t.Errorf("span %s: %s %v after the rebuild, want %v (twice %v)", id, k, a.columns[k], want, v)
				}
			case !reflect.DeepEqual(a.columns[k], v):
				t.Errorf("span %s: %s changed from %v to %v", id, k, v, a.columns[k])
			}
		}
	}
	if changed < 3 {
		t.Errorf("%d operations priced as openai/gpt-4o; the fixtures have more", changed)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if out, err := exec.Command(bin, "report", "--config", cfgPath, "--since", "all", "-o", page).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), "openai/gpt-4o") && !strings.Contains(string(html), "gpt-4o-2024-08-06") {
		t.Errorf("report: %v\n%.2000s", err, html)
	}
}

// operationRow is a genai_operations row: the operation's columns as JSON
// values (nulls left out, decimals as text) and the span's.
type operationRow struct {
	columns               map[string]any
	tenant, service, name string
	duration              float64
}

// operationRows reads genai_operations by span id.
func operationRows(t *testing.T, dbPath string) map[string]operationRow {
	t.Helper()
	db := openDuckDBFile(t, dbPath)
	defer db.Close()
	fields := make([]string, len(genai.Columns))
	for i, c := range genai.Columns {
		v := c.Name
		if c.Type == schema.Decimal {
			v += "::VARCHAR"
		}
		fields[i] = fmt.Sprintf("'%s', %s", c.Name, v)
	}
	rows, err := db.Query(`SELECT span_id, tenant_id, service_name, span_name, duration_ms, json_object(` + strings.Join(fields, ", ") + `)::VARCHAR FROM genai_operations`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]operationRow{}
	for rows.Next() {
		var id, obj string
		var r operationRow
		if err := rows.Scan(&id, &r.tenant, &r.service, &r.name, &r.duration, &obj); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(obj), &r.columns); err != nil {
			t.Fatal(err)
		}
		for k, v := range r.columns {
			if v == nil {
				delete(r.columns, k)
			}
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// repricedTable writes the embedded price table with every price of one
// model doubled, and returns its path.
func repricedTable(t *testing.T, provider, model string) string {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(prices.EmbeddedJSON(), &raw); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range raw["providers"].([]any) {
		p := p.(map[string]any)
		if p["id"] != provider {
			continue
		}
		for _, m := range p["models"].([]any) {
			m := m.(map[string]any)
			if m["id"] == model {
				for k, v := range m["prices"].(map[string]any) {
					if f, ok := v.(float64); ok {
						m["prices"].(map[string]any)[k] = 2 * f
					}
				}
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no model %s/%s in the embedded table", provider, model)
	}
	data, _ := json.Marshal(raw)
	path := filepath.Join(t.TempDir(), "repriced.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// double doubles a decimal amount of dollars, exactly.
func double(t *testing.T, s string) string {
	t.Helper()
	var whole, frac int64
	if _, err := fmt.Sscanf(s, "%d.%d", &whole, &frac); err != nil {
		t.Fatal(err)
	}
	return prices.Decimal(2 * (whole*1e12 + frac))
}
