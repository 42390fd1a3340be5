package verify

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/genai/genaitest"
	"github.com/tracelake/tracelake/internal/sink"
)

// genaiTables creates, in an in-memory DuckDB, the spans and operations
// tables as the sinks have them (the columns the check reads) and the
// dead-letter table, and runs stmts.
func genaiTables(t *testing.T, stmts ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	coords := `ktopic VARCHAR, kpartition INTEGER, koffset BIGINT, kindex INTEGER`
	for _, q := range append([]string{
		`CREATE TABLE spans (tenant_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, name VARCHAR, span_attributes JSON, ` + coords + `)`,
		`CREATE TABLE ops (tenant_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, ` + coords + `)`,
		`CREATE TABLE dlq (topic VARCHAR, "partition" INTEGER, "offset" BIGINT, value BLOB, error VARCHAR, stage VARCHAR)`,
	}, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// genaiSpans are spans of partition t/0: GenAI ones (each convention's
// marker, Claude Code's name) at offsets 5 to 7, a plain span at 6, and
// the operations of the GenAI ones.
var genaiSpans = []string{
	`INSERT INTO spans VALUES
		('a', 't1', 's1', 'chat', '{"gen_ai.operation.name": "chat"}', 't', 0, 5, 0),
		('a', 't1', 's2', 'GET /', '{"http.method": "GET"}', 't', 0, 6, 0),
		('a', 't1', 's3', 'llm', '{"openinference.span.kind": "LLM"}', 't', 0, 6, 1),
		('a', 't2', 's4', 'claude_code.llm_request', '{}', 't', 0, 7, 0),
		('b', 't3', 's5', 'openai.chat', '{"llm.request.type": null}', 't', 0, 7, 1)`,
	`INSERT INTO ops VALUES ('a', 't1', 's1', 't', 0, 5, 0), ('a', 't1', 's3', 't', 0, 6, 1),
		('a', 't2', 's4', 't', 0, 7, 0), ('b', 't3', 's5', 't', 0, 7, 1)`,
}

// checkGenAI runs verify's check of the operations against the spans,
// and of the GenAI spans below positions (nil: all) against the
// operations.
func checkGenAI(t *testing.T, db *sql.DB, below ...map[sink.TopicPartition]int64) *Report {
	t.Helper()
	r := &Report{OK: true}
	src := Sources{Derives: OperationSpansSQL("span_attributes", "name"), DLQ: "dlq"}
	if len(below) > 0 {
		src.Below = below[0]
	}
	if err := r.CheckDerived(context.Background(), SQLQuerier{DB: db}, "genai_operations", "ops", "spans", genai.SpanIdentity, src); err != nil {
		t.Fatal(err)
	}
	return r
}

// A GenAI span whose operation row is gone (deleted, never written, lost
// by a rebuild) passed verify: it checked each operation's span, never
// each GenAI span's operation. It fails it now, saying where; so does a
// span whose coordinates hold an operation of another span.
func TestGenAISpanWithoutItsOperation(t *testing.T) {
	db := genaiTables(t, genaiSpans...)
	if r := checkGenAI(t, db); !r.OK {
		t.Fatalf("every GenAI span has its operation: %v", r.Problems)
	}
	if _, err := db.Exec(`DELETE FROM ops WHERE span_id = 's5'`); err != nil {
		t.Fatal(err)
	}
	r := checkGenAI(t, db)
	if p := strings.Join(r.Problems, "; "); r.OK || !strings.Contains(p, "1 GenAI spans without their operation") || !strings.Contains(p, "t/0 offset 7 index 1") {
		t.Fatalf("an operation deleted: OK %v, %v", r.OK, r.Problems)
	}
	// Its place taken by another span's operation: still not its own.
	if _, err := db.Exec(`UPDATE ops SET kindex = 1 WHERE span_id = 's4'`); err != nil {
		t.Fatal(err)
	}
	r = checkGenAI(t, db)
	if p := strings.Join(r.Problems, "; "); r.OK || !strings.Contains(p, "2 GenAI spans without their operation") {
		t.Fatalf("an operation at another span's coordinates: %v", r.Problems)
	}
}

// An operation the sink refused is in the dead-letter table, as the row
// itself at its span's offset (Databend: base64 of its JSON): its span is
// not missing one. A dead letter of another row of the same message
// excuses only that row.
func TestGenAISpanWithItsOperationDeadLettered(t *testing.T) {
	op := func(span string, index int) string {
		return fmt.Sprintf(`{"tenant_id":"a","trace_id":"t1","span_id":%q,"operation":"chat","ktopic":"t","kpartition":0,"koffset":6,"kindex":%d}`, span, index)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(op("s3", 1)))
	db := genaiTables(t, append(genaiSpans,
		`DELETE FROM ops WHERE span_id = 's3'`,
		// A decode-stage dead letter of the same offset, not an operation.
		`INSERT INTO dlq VALUES ('t', 0, 6, '\x00\xff'::BLOB, 'not a message', 'decode')`,
		`INSERT INTO dlq VALUES ('t', 0, 6, encode('`+b64+`'), 'Databend refused it', 'load')`)...)
	r := checkGenAI(t, db)
	if !r.OK || r.Derived.Missing != 0 || r.Derived.DeadLettered != 1 {
		t.Fatalf("an operation dead-lettered: %+v %v", r.Derived, r.Problems)
	}
	// The dead letter as DuckDB's table holds it (the row's bytes).
	if _, err := db.Exec(`UPDATE dlq SET value = encode('` + op("s3", 1) + `') WHERE stage = 'load'`); err != nil {
		t.Fatal(err)
	}
	if r := checkGenAI(t, db); !r.OK || r.Derived.DeadLettered != 1 {
		t.Fatalf("an operation dead-lettered as its bytes: %+v %v", r.Derived, r.Problems)
	}
	// Another span of the message (offset 6, index 0 is no GenAI span:
	// say it was one, s1 moved there) is not excused by it.
	if _, err := db.Exec(`UPDATE spans SET koffset = 6, kindex = 2 WHERE span_id = 's1'`); err != nil {
		t.Fatal(err)
	}
	r = checkGenAI(t, db)
	if p := strings.Join(r.Problems, "; "); r.OK || r.Derived.Missing != 1 || !strings.Contains(p, "t/0 offset 6 index 2") {
		t.Fatalf("a GenAI span beside a dead-lettered operation: %+v %v", r.Derived, r.Problems)
	}
}

// A deployment upgraded from a release without genai_operations, or that
// ran with genai.operations off, has GenAI spans loaded without
// operations: those before their partition's first operation (and those
// of a partition without any) are not reported; a span past it is.
func TestGenAISpansLoadedBeforeOperations(t *testing.T) {
	db := genaiTables(t, append(genaiSpans,
		`INSERT INTO spans VALUES
			('a', 't0', 's01', 'chat', '{"gen_ai.system": "openai"}', 't', 0, 1, 0),
			('a', 't0', 's02', 'chat', '{"gen_ai.operation.name": "chat"}', 't', 0, 4, 3),
			('a', 't9', 's91', 'chat', '{"gen_ai.operation.name": "chat"}', 't', 1, 100, 0),
			('a', 't9', 's92', 'chat', '{"gen_ai.operation.name": "chat"}', 'u', 0, 3, 0)`)...)
	if r := checkGenAI(t, db); !r.OK || r.Derived.Missing != 0 {
		t.Fatalf("spans loaded before the operations: %+v %v", r.Derived, r.Problems)
	}
	// The partition's first operations taken: its first GenAI span with
	// one is the first checked (what cannot be told apart, README).
	if _, err := db.Exec(`DELETE FROM ops WHERE koffset = 5; INSERT INTO spans VALUES ('a', 't1', 's6', 'chat', '{"gen_ai.system": "x"}', 't', 0, 9, 0)`); err != nil {
		t.Fatal(err)
	}
	r := checkGenAI(t, db)
	if p := strings.Join(r.Problems, "; "); r.OK || r.Derived.Missing != 1 || !strings.Contains(p, "t/0 offset 9 index 0") {
		t.Fatalf("a span past the partition's first operation: %+v %v", r.Derived, r.Problems)
	}
}

// Where the tables are not read in one snapshot (Databend statements,
// Iceberg's commits), a load committing meanwhile can show spans whose
// operations are not read: only the spans below the positions read first
// are checked, so neither those nor the operations of a load past them
// are a false alarm.
func TestGenAISpansPastPositions(t *testing.T) {
	db := genaiTables(t, append(genaiSpans,
		// A load of offsets 8 and 9 whose spans are read, not yet its
		// operations.
		`INSERT INTO spans VALUES ('a', 't8', 's8', 'chat', '{"gen_ai.system": "x"}', 't', 0, 8, 0),
			('a', 't9', 's9', 'chat', '{"gen_ai.system": "x"}', 't', 0, 9, 0)`,
		// One of a partition the positions do not know yet.
		`INSERT INTO spans VALUES ('a', 'u1', 'u1', 'chat', '{"gen_ai.system": "x"}', 'u', 0, 0, 0),
			('a', 'u0', 'u0', 'chat', '{"gen_ai.system": "x"}', 'u', 0, 0, 1)`,
		`INSERT INTO ops VALUES ('a', 'u0', 'u0', 'u', 0, 0, 1)`)...)
	below := map[sink.TopicPartition]int64{{Topic: "t", Partition: 0}: 8}
	if r := checkGenAI(t, db, below); !r.OK || r.Derived.Missing != 0 {
		t.Fatalf("spans past the positions: %+v %v", r.Derived, r.Problems)
	}
	below[sink.TopicPartition{Topic: "t", Partition: 0}] = 10
	if r := checkGenAI(t, db, below); r.OK || r.Derived.Missing != 2 {
		t.Fatalf("the same spans below the positions: %+v %v", r.Derived, r.Problems)
	}
	if r := checkGenAI(t, db, map[sink.TopicPartition]int64{}); !r.OK || r.Derived.Missing != 0 {
		t.Fatalf("no positions: %+v %v", r.Derived, r.Problems)
	}
}

// OperationSpansSQL and OperationSpansDuckDB are the mapper's rule: on
// each fixture of the conventions (and a few edge cases) each says what
// genai.Convention says.
func TestOperationSpansSQLIsTheMappersRule(t *testing.T) {
	db := genaiTables(t)
	type span struct {
		name  string
		attrs map[string]any
	}
	var spans []span
	for _, f := range genaitest.Fixtures(t) {
		spans = append(spans, span{f.Span.Name, f.Attributes(t).AsRaw()})
	}
	spans = append(spans, span{"claude_code", nil}, span{"x.claude_code.tool", nil}, span{"claude_code.", nil},
		span{"chat", map[string]any{"gen_ai.provider.name": nil}}, span{"chat", map[string]any{"gen_ai": map[string]any{"system": "x"}}},
		span{"chat", map[string]any{"llm.model_name.x": "m", "gen_ai.system.y": "x"}})
	// A marker by its value (the Vercel AI SDK's embedding calls): only
	// the key itself holding one of the values as a string.
	for _, attrs := range []map[string]any{
		{"ai.operationId": "ai.embedMany.doEmbed"}, {"ai.operationId": "ai.embed"}, {"ai.operationId": "ai.embed.doEmbed "},
		{"ai.operationId": int64(5)}, {"ai.operationId": nil}, {"ai.operationId": []any{"ai.embed.doEmbed"}},
		{"ai": map[string]any{"operationId": "ai.embed.doEmbed"}}, {"ai.operationId": "ai.embed", "note": "ai.embed.doEmbed"},
	} {
		spans = append(spans, span{"ai.embed.doEmbed", attrs})
	}
	for i, s := range spans {
		attrs := pcommon.NewMap()
		if err := attrs.FromRaw(s.attrs); err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(attrs.AsRaw())
		if err != nil {
			t.Fatal(err)
		}
		want := genai.Convention(&genai.Span{Name: s.name, Attributes: attrs}) != ""
		for dialect, cond := range map[string]string{"portable": OperationSpansSQL("span_attributes", "name"), "DuckDB": OperationSpansDuckDB("span_attributes", "name")} {
			var got bool
			if err := db.QueryRow(`SELECT `+cond+` FROM (SELECT ?::JSON AS span_attributes, ? AS name)`,
				string(j), s.name).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("span %d %q %s: the %s SQL says %v, genai.Convention %v", i, s.name, j, dialect, got, want)
			}
		}
	}
}

// The Vercel AI SDK's embedding calls carry no gen_ai.* attribute: each
// model call (a doEmbed span, one per embed and per chunk of an
// embedMany) is an operation, the call around them (ai.embed,
// ai.embedMany, with the same attributes and usage) is none; only their
// ai.operationId tells them apart. An embedding call whose operation row
// went missing must fail verify on either SQL, and the calls around them,
// which have none, must not.
func TestVercelEmbedSpansWithoutTheirOperation(t *testing.T) {
	span := func(span, id string, offset, index int) string {
		return fmt.Sprintf(`('a', 'tv', '%s', '%s', '{"ai.operationId": "%s", "ai.model.provider": "openai.embedding", `+
			`"ai.model.id": "text-embedding-3-small", "ai.usage.tokens": 10}', 't', 0, %d, %d)`, span, id, id, offset, index)
	}
	db := genaiTables(t,
		`INSERT INTO spans VALUES `+strings.Join([]string{
			span("m0", "ai.embedMany", 1, 0), span("m1", "ai.embedMany.doEmbed", 1, 1), span("m2", "ai.embedMany.doEmbed", 1, 2),
			span("e0", "ai.embed", 2, 0), span("e1", "ai.embed.doEmbed", 2, 1),
		}, ", "),
		// m1, the partition's first operation, stays: the spans before
		// it are not checked (TestGenAISpansLoadedBeforeOperations).
		`INSERT INTO ops VALUES ('a', 'tv', 'm1', 't', 0, 1, 1), ('a', 'tv', 'm2', 't', 0, 1, 2), ('a', 'tv', 'e1', 't', 0, 2, 1)`)
	for dialect, cond := range map[string]string{"portable": OperationSpansSQL("span_attributes", "name"), "DuckDB": OperationSpansDuckDB("span_attributes", "name")} {
		check := func() *Report {
			t.Helper()
			r := &Report{OK: true}
			if err := r.CheckDerived(context.Background(), SQLQuerier{DB: db}, "genai_operations", "ops", "spans", genai.SpanIdentity,
				Sources{Derives: cond, DLQ: "dlq"}); err != nil {
				t.Fatal(err)
			}
			return r
		}
		if r := check(); !r.OK || r.Derived.Missing != 0 {
			t.Fatalf("%s: each model call has its operation, the calls around them none: %+v %v", dialect, r.Derived, r.Problems)
		}
		for _, gone := range []string{"m2", "e1"} {
			if _, err := db.Exec(`DELETE FROM ops WHERE span_id = ?`, gone); err != nil {
				t.Fatal(err)
			}
			r := check()
			if p := strings.Join(r.Problems, "; "); r.OK || r.Derived.Missing != 1 || !strings.Contains(p, "1 GenAI spans without their operation") {
				t.Errorf("%s: the operation of %s deleted: OK %v, %+v %v", dialect, gone, r.OK, r.Derived, r.Problems)
			}
			if _, err := db.Exec(`INSERT INTO ops SELECT tenant_id, trace_id, span_id, ktopic, kpartition, koffset, kindex FROM spans WHERE span_id = ?`, gone); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// An operation row of a span the mapper makes no operation of (a plain
// span, or the Vercel AI SDK's ai.embed around its model call, whose
// usage is the call's: its tokens and cost counted twice) passed verify,
// which checked each GenAI span's operation and each operation's span,
// never that the span was a GenAI one. It fails it now, on either SQL.
func TestOperationOfASpanNoConventionMarks(t *testing.T) {
	for dialect, cond := range map[string]string{"portable": OperationSpansSQL("span_attributes", "name"), "DuckDB": OperationSpansDuckDB("span_attributes", "name")} {
		db := genaiTables(t, append(genaiSpans,
			`INSERT INTO spans VALUES ('a', 'tv', 'e0', 'ai.embed', '{"ai.operationId": "ai.embed", "ai.usage.tokens": 10}', 't', 0, 8, 0),
				('a', 'tv', 'e1', 'ai.embed.doEmbed', '{"ai.operationId": "ai.embed.doEmbed", "ai.usage.tokens": 10}', 't', 0, 8, 1)`,
			`INSERT INTO ops VALUES ('a', 'tv', 'e1', 't', 0, 8, 1)`)...)
		check := func() *Report {
			t.Helper()
			r := &Report{OK: true}
			if err := r.CheckDerived(context.Background(), SQLQuerier{DB: db}, "genai_operations", "ops", "spans", genai.SpanIdentity,
				Sources{Derives: cond, DLQ: "dlq"}); err != nil {
				t.Fatal(err)
			}
			return r
		}
		if r := check(); !r.OK {
			t.Fatalf("%s: each operation's span is a GenAI one: %v", dialect, r.Problems)
		}
		for _, extra := range []string{`('a', 't1', 's2', 't', 0, 6, 0)`, `('a', 'tv', 'e0', 't', 0, 8, 0)`} {
			if _, err := db.Exec(`INSERT INTO ops VALUES ` + extra); err != nil {
				t.Fatal(err)
			}
			r := check()
			if p := strings.Join(r.Problems, "; "); r.OK || !strings.Contains(p, "1 rows whose span is no GenAI operation") {
				t.Errorf("%s: an operation %s of a span the mapper reads as none: OK %v, %v", dialect, extra, r.OK, r.Problems)
			}
			if _, err := db.Exec(`DELETE FROM ops WHERE (tenant_id, trace_id, span_id, ktopic, kpartition, koffset, kindex) = ` + extra); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The text report's line of the derived table counts the rows of spans
// that derive none beside its other counts: it left them out, so the
// line read all clear above a verdict failing on them.
func TestTextReportCountsOperationsOfSpansThatAreNone(t *testing.T) {
	db := genaiTables(t, append(genaiSpans, `INSERT INTO ops VALUES ('a', 't1', 's2', 't', 0, 6, 0)`)...)
	r := &Report{OK: true}
	if err := r.CheckDerived(context.Background(), SQLQuerier{DB: db}, "genai_operations", "ops", "spans", genai.SpanIdentity,
		Sources{Derives: OperationSpansDuckDB("span_attributes", "name"), DLQ: "dlq"}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteText(&b)
	if r.Derived.Unmarked != 1 || !strings.Contains(b.String(), "1 of source rows that derive none") {
		t.Errorf("unmarked %d, text report:\n%s\nwant its derived line to count 1 of source rows that derive none", r.Derived.Unmarked, b.String())
	}
}
