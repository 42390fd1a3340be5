package main

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// nastyTraces are export requests whose spans hold what a sink is most
// likely to store differently: times in 1970 and past int64's 2262,
// nanosecond precision, ids all zero, attributes of every OTLP type and at
// every number edge, unicode, long strings, deep nesting, many events, and
// GenAI spans with token counts as strings, negatives, floats and past
// int64, for a known and an unknown model.
func nastyTraces() []ptrace.Traces {
	var out []ptrace.Traces
	newSpan := func(td ptrace.Traces, service string) ptrace.Span {
		rs := td.ResourceSpans().AppendEmpty()
		if service != "" {
			rs.Resource().Attributes().PutStr("service.name", service)
		}
		rs.Resource().Attributes().PutStr("host.name", "h\u202eost") // RTL override
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("scope ✓")
		ss.Scope().SetVersion("1.0.0")
		ss.Scope().Attributes().PutEmpty("empty")
		return ss.Spans().AppendEmpty()
	}
	ids := func(s ptrace.Span, n byte) {
		s.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, n})
		s.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, n})
	}

	// 1970: the first seconds and days after the epoch, nanoseconds kept
	// to the microsecond.
	td := ptrace.NewTraces()
	s := newSpan(td, "early")
	ids(s, 1)
	s.SetName("boot clock")
	s.SetStartTimestamp(pcommon.Timestamp(1_000_000_999))    // 1970-01-01T00:00:01.000000999
	s.SetEndTimestamp(pcommon.Timestamp(86_400_000_001_000)) // 1970-01-02T00:00:00.000001
	ev := s.Events().AppendEmpty()
	ev.SetTimestamp(1)
	ev.SetName("first nanosecond")
	s2 := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	ids(s2, 2)
	s2.SetName("day 200 of 1970")
	s2.SetStartTimestamp(pcommon.Timestamp(200 * 86_400 * uint64(time.Second)))
	s2.SetEndTimestamp(pcommon.Timestamp(200*86_400*uint64(time.Second) + 1))
	out = append(out, td)

	// Every attribute type and edge value; zero ids; times past 2262.
	td = ptrace.NewTraces()
	s = newSpan(td, "")
	s.SetName("edges \x00 nul \u200f rtl 😀 \xff")
	s.SetStartTimestamp(pcommon.Timestamp(math.MaxInt64 + 1))
	s.SetEndTimestamp(pcommon.Timestamp(math.MaxUint64))
	a := s.Attributes()
	a.PutInt("int.max", math.MaxInt64)
	a.PutInt("int.min", math.MinInt64)
	a.PutDouble("neg.zero", math.Copysign(0, -1))
	a.PutDouble("double.max", math.MaxFloat64)
	a.PutDouble("double.tiny", 5e-324)
	a.PutDouble("double.exp", 1e21)
	a.PutDouble("double.whole", 2)
	a.PutDouble("nan", math.NaN())
	a.PutDouble("inf", math.Inf(-1))
	a.PutBool("bool", true)
	a.PutEmptyBytes("bytes").FromRaw([]byte{0, 0xff, 0x10})
	a.PutEmptyBytes("bytes.empty")
	a.PutEmpty("empty")
	sl := a.PutEmptySlice("slice")
	sl.AppendEmpty().SetStr("x")
	sl.AppendEmpty().SetInt(-1)
	sl.AppendEmpty()
	sl.AppendEmpty().SetEmptyMap()
	a.PutEmptySlice("slice.empty")
	a.PutEmptyMap("map.empty")
	m := a.PutEmptyMap("deep")
	for range 40 {
		m = m.PutEmptyMap("d")
	}
	m.PutStr("bottom", "\"quoted\" \\ \n\t\u0001")
	a.PutStr("long", strings.Repeat("long ✓ ", 30_000))
	a.PutStr("surrogate.text", `\ud800`)
	a.PutStr("", "empty key")
	for i := range 300 {
		e := s.Events().AppendEmpty()
		e.SetName(fmt.Sprintf("event %d", i))
		e.SetTimestamp(pcommon.Timestamp(1_700_000_000_123_456_789 + uint64(i)))
		e.Attributes().PutInt("i", int64(i))
	}
	l := s.Links().AppendEmpty()
	l.SetSpanID(pcommon.SpanID{9})
	l.Attributes().PutDouble("w", 0.1)
	out = append(out, td)

	// GenAI spans: a known model with counts as strings, an unknown one
	// with negatives, floats and counts past int64 when summed.
	td = ptrace.NewTraces()
	s = newSpan(td, "agent")
	ids(s, 3)
	s.SetName("chat gpt-4o")
	s.SetStartTimestamp(pcommon.Timestamp(1_764_633_600_123_456_789))
	s.SetEndTimestamp(pcommon.Timestamp(1_764_633_601_987_654_321))
	a = s.Attributes()
	a.PutStr("gen_ai.operation.name", "chat")
	a.PutStr("gen_ai.provider.name", "openai")
	a.PutStr("gen_ai.request.model", "gpt-4o")
	a.PutStr("gen_ai.usage.input_tokens", "1200")
	a.PutInt("gen_ai.usage.output_tokens", 345)
	a.PutDouble("gen_ai.request.temperature", 0.7)
	s.Status().SetCode(ptrace.StatusCodeError)
	s = td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	ids(s, 4)
	s.SetName("chat unknown")
	s.SetStartTimestamp(pcommon.Timestamp(1_764_633_600_000_000_000))
	s.SetEndTimestamp(pcommon.Timestamp(1_764_633_600_000_000_000))
	a = s.Attributes()
	a.PutStr("gen_ai.operation.name", "chat")
	a.PutStr("gen_ai.system", "no-such-provider")
	a.PutStr("gen_ai.request.model", "no-such-model-🙂")
	a.PutInt("gen_ai.usage.input_tokens", -3)
	a.PutDouble("gen_ai.usage.output_tokens", 2.5)
	a.PutStr("gen_ai.usage.cache_read.input_tokens", "abc")
	s = td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	ids(s, 5)
	s.SetName("claude_code.api_request")
	s.SetStartTimestamp(pcommon.Timestamp(1_764_633_600_000_000_001))
	a = s.Attributes()
	a.PutStr("model", "claude-sonnet-4-5")
	a.PutInt("input_tokens", math.MaxInt64)
	a.PutInt("cache_read_tokens", 10)
	a.PutInt("output_tokens", 7)
	out = append(out, td)
	return out
}

// sinkRows are a sink's rows of one table, each column's value in a
// canonical text (see canonical), in (koffset, kindex) order.
type sinkRows []map[string]string

// The same OTLP messages, read by the pipeline into DuckDB, Databend (its
// test server) and Iceberg, give the same otel_spans, genai_operations
// and dead-letter rows. What legitimately differs is normalised (see
// canonical and dlqRow); everything else must be equal.
func TestSinksStoreTheSameOTLPRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline three times")
	}
	cluster, prod := startKafka(t, 1)
	var recs []*kgo.Record
	for _, td := range nastyTraces() {
		recs = append(recs, &kgo.Record{Topic: testTopic, Value: marshalOTLP(t, "otlp_proto", td),
			Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("team-a")}}})
	}
	// Dead letters: not OTLP, and a tenant id Mimir refuses.
	recs = append(recs, &kgo.Record{Topic: testTopic, Key: []byte("k\x00"), Value: []byte("not OTLP \x00\xff")},
		&kgo.Record{Topic: testTopic, Value: marshalOTLP(t, "otlp_proto", nastyTraces()[0]),
			Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("..")}}})
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sameRowsOnSinks(t, cluster.ListenAddrs()[0], "traces", []string{"otel_spans", "genai_operations", "otel_spans_dlq"})
}

// sameRowsOnSinks reads the OTLP messages of signal on testTopic at
// broker into DuckDB, Databend (its test server) and Iceberg, and checks
// that each of tables holds the same rows on all three.
func sameRowsOnSinks(t *testing.T, broker, signal string, tables []string) {
	t.Helper()
	srv := databendtest.New("u", "p")
	srv.Set(func() { srv.SQL = true }) // executes the dedup model's setup
	t.Cleanup(srv.Close)
	kinds := []struct {
		name, sink string
	}{
		{"duckdb", "duckdb: {path: %[1]q}"},
		{"databend", "type: databend, databend: {dsn: %[2]q}"},
		{"iceberg", "type: iceberg, iceberg: {catalog: %[3]q, warehouse: %[4]q, commit_interval: 100ms}"},
	}
	got := map[string]map[string]sinkRows{}
	for _, k := range kinds {
		dir := t.TempDir()
		path := filepath.Join(dir, "tracelake.yaml")
		sinkCfg := fmt.Sprintf(k.sink, filepath.Join(dir, "t.duckdb"), srv.DSN(""), filepath.Join(dir, "catalog.db"), filepath.Join(dir, "wh"))
		load := "load: {max_interval: 100ms}\n"
		if k.name == "iceberg" {
			load = "" // Iceberg loads at its commit_interval
		}
		text := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], group: %s, format: otlp_proto, signal: %s}\n"+
			"batch: {max_interval: 100ms}\n%ssink: {%s}\nmetrics: {listen: \"\"}\n",
			broker, testTopic, "g-"+k.name, signal, load, sinkCfg)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got[k.name] = loadAndRead(t, k.name, cfg, srv)
	}
	for _, tbl := range tables {
		want := got["duckdb"][tbl]
		if len(want) == 0 {
			t.Errorf("duckdb: no rows in %s", tbl)
		}
		for _, other := range []string{"databend", "iceberg"} {
			rows := got[other][tbl]
			if len(rows) != len(want) {
				t.Errorf("%s: %d rows in %s, duckdb %d", other, len(rows), tbl, len(want))
				continue
			}
			for i := range want {
				for c, v := range want[i] {
					if w, ok := rows[i][c]; !ok || w != v {
						t.Errorf("%s.%s row %d (%s/%s), column %s:\n  %s: %.300s\n  duckdb:   %.300s", other, tbl, i,
							want[i]["koffset"], want[i]["kindex"], c, other, w, v)
					}
				}
			}
		}
	}
}

// loadAndRead runs the pipeline on cfg's sink until it is idle and reads
// its tables back.
func loadAndRead(t *testing.T, kind string, cfg *config.Config, srv *databendtest.Server) map[string]sinkRows {
	t.Helper()
	ctx := context.Background()
	runToIdle(t, kind, cfg, nil)
	typed, derived := typedTable(cfg), derivedTable(cfg)
	main, dlqName := typed.Name, typed.Name+"_dlq"
	out := map[string]sinkRows{}
	switch kind {
	case "duckdb":
		db := openDuckDBFile(t, cfg.Sink.DuckDB.Path)
		out[main] = duckRows(t, db, main, duckdbsink.TypedColumns(typed))
		if derived != nil {
			out[derived.Name] = duckRows(t, db, derived.Name, duckdbsink.TypedColumns(derived))
		}
		out[dlqName] = duckRows(t, db, dlqName, duckdbsink.DLQColumns())
	case "iceberg":
		ice, err := openIceberg(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ice.Close()
		db, err := memoryDuckDB()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		raw, dlq := ice.Identifiers()
		type icebergTable struct {
			id   table.Identifier
			name string
			cols []duckdbsink.Column
		}
		tables := []icebergTable{{raw, main, duckdbsink.TypedColumns(typed)}, {dlq, dlqName, duckdbsink.DLQColumns()}}
		if derived != nil {
			tables = append(tables, icebergTable{ice.DerivedIdentifier(), derived.Name, duckdbsink.TypedColumns(derived)})
		}
		for _, v := range tables {
			if _, err := copyIcebergTable(ctx, ice, v.id, db, v.name, v.cols); err != nil {
				t.Fatal(err)
			}
			out[v.name] = duckRows(t, db, v.name, v.cols)
		}
	case "databend":
		out[main] = databendRows(t, srv, main, duckdbsink.TypedColumns(typed))
		if derived != nil {
			out[derived.Name] = databendRows(t, srv, derived.Name, duckdbsink.TypedColumns(derived))
		}
		out[dlqName] = databendRows(t, srv, dlqName, duckdbsink.DLQColumns())
	}
	return out
}

// runToIdle runs the pipeline on cfg's sink (kind: duckdb, databend or
// iceberg) until it is idle, then, if merge is not nil, calls it with the
// sink's model merger before the sink closes.
func runToIdle(t *testing.T, kind string, cfg *config.Config, merge func(modelMerger)) {
	t.Helper()
	ctx := context.Background()
	var snk sink.Sink
	var merger modelMerger
	var err error
	if kind == "iceberg" {
		snk, err = openIceberg(ctx, cfg)
	} else {
		snk, merger, err = openSink(ctx, cfg, nil, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := pipeline.Run(runCtx, ctx, cfg, snk, pipeline.RunOptions{ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond}); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if runCtx.Err() != nil {
		t.Fatalf("%s: the pipeline did not become idle", kind)
	}
	if merge != nil {
		merge(merger)
	}
	if err := snk.Close(); err != nil {
		t.Fatal(err)
	}
}

// dlqCompared are the dead-letter columns every sink has in common and
// that must agree: add_time is the load's clock.
var dlqCompared = []string{"topic", "partition", "offset", "key", "value", "error", "stage"}

// duckRows reads table's cols from db (a DuckDB sink, or Iceberg's tables
// copied into DuckDB as `tracelake sql` does), in coordinate order, each
// value in its canonical text.
func duckRows(t *testing.T, db *sql.DB, name string, cols []duckdbsink.Column) sinkRows {
	t.Helper()
	var sel, names []string
	for _, c := range cols {
		if strings.HasSuffix(name, "_dlq") && !slices.Contains(dlqCompared, c.Name) {
			continue
		}
		expr := quoteIdent(c.Name)
		switch c.Type {
		case "TIMESTAMP":
			expr = "epoch_us(" + expr + ")"
		case "BLOB":
			expr = "hex(" + expr + ")"
		}
		sel = append(sel, expr+"::VARCHAR")
		names = append(names, c.Name)
	}
	rows, err := db.Query(fmt.Sprintf("SELECT %s FROM %s", strings.Join(sel, ", "), quoteIdent(name)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rows.Close()
	var out sinkRows
	for rows.Next() {
		vals := make([]sql.NullString, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := map[string]string{}
		for i, n := range names {
			if !vals[i].Valid {
				r[n] = "NULL"
				continue
			}
			r[n] = canonical(t, typeOf(cols, n), vals[i].String)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sortRows(out, cols)
	return out
}

// sortRows puts rows in the order the sinks are compared in: by their
// coordinates (koffset and kindex, or a dead letter's or reject's
// partition and offset), else (a model's target) by every column's
// canonical text in cols' order.
func sortRows(rows sinkRows, cols []duckdbsink.Column) {
	num := func(r map[string]string, c string) int64 {
		n, _ := strconv.ParseInt(r[c], 10, 64)
		return n
	}
	var by []string
	switch {
	case typeOf(cols, "koffset") != "":
		by = []string{"koffset", "kindex"}
	case typeOf(cols, "offset") != "":
		by = []string{"partition", "offset"}
	}
	slices.SortStableFunc(rows, func(x, y map[string]string) int {
		for _, c := range by {
			if d := cmp.Compare(num(x, c), num(y, c)); d != 0 {
				return d
			}
		}
		if by != nil {
			return 0
		}
		for _, c := range cols {
			if d := strings.Compare(x[c.Name], y[c.Name]); d != 0 {
				return d
			}
		}
		return 0
	})
}

// databendRows reads table's committed rows from the test Databend, in
// coordinate order, each value in its canonical text.
func databendRows(t *testing.T, srv *databendtest.Server, name string, cols []duckdbsink.Column) sinkRows {
	t.Helper()
	var out sinkRows
	for _, row := range srv.Rows(name) {
		r := map[string]string{}
		for _, c := range cols {
			if strings.HasSuffix(name, "_dlq") && !slices.Contains(dlqCompared, c.Name) {
				continue
			}
			v, ok := row[c.Name]
			if !ok || string(v) == "null" {
				r[c.Name] = "NULL"
				continue
			}
			text := string(v)
			if c.Type != "JSON" && strings.HasPrefix(text, `"`) {
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					t.Fatal(err)
				}
				text = s
			}
			if c.Type == "BLOB" {
				// Databend's dead-letter key and value are base64 of the
				// bytes (NDJSON cannot carry bytes that are not UTF-8):
				// compared as the bytes, as the others' BLOBs are.
				b, err := base64.StdEncoding.DecodeString(text)
				if err != nil {
					t.Fatalf("databend %s.%s is not base64: %q", name, c.Name, text)
				}
				text = strings.ToUpper(hex.EncodeToString(b))
			}
			if c.Type == "TIMESTAMP" {
				if ts, err := time.Parse("2006-01-02 15:04:05.999999", text); err == nil {
					// A time the test server's engine wrote (a merge's
					// target), not one loaded from NDJSON as its
					// microseconds: compared as microseconds, as the
					// others are read.
					text = strconv.FormatInt(ts.UnixMicro(), 10)
				}
			}
			r[c.Name] = canonical(t, c.Type, text)
		}
		out = append(out, r)
	}
	sortRows(out, cols)
	return out
}

func typeOf(cols []duckdbsink.Column, name string) string {
	for _, c := range cols {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// canonical is a value's text with only what legitimately differs between
// the sinks taken out:
//   - JSON: object keys sorted and whitespace dropped (Databend's VARIANT
//     stores objects as JSONB, keys sorted; DuckDB and Iceberg keep the
//     text), numbers kept as written;
//   - doubles: as the double they hold ("0" and "0.0");
//   - decimals: trailing zeros of the fraction (DECIMAL(18, 12) prints all
//     twelve places, the staged text need not);
//   - timestamps are compared as microseconds since the epoch (every
//     sink's precision), read that way above.
func canonical(t *testing.T, typ, text string) string {
	switch {
	case typ == "JSON":
		d := json.NewDecoder(strings.NewReader(text))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return "INVALID JSON " + text
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	case typ == "DOUBLE":
		// DuckDB prints a whole double with ".0", the staged JSON need
		// not: compared as the double.
		if f, err := strconv.ParseFloat(text, 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case strings.HasPrefix(typ, "DECIMAL"):
		if r, ok := new(big.Rat).SetString(text); ok {
			return r.RatString()
		}
	}
	return text
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
