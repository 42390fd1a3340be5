package query

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// pruneLake is an iceLake whose spans are also in a DuckDB database read
// by the DuckDB reader: the same query on both must answer the same, so a
// file the Iceberg reader pruned by a predicate that keeps one of its
// rows shows as a missing row.
type pruneLake struct {
	*iceLake
	mirror *DuckDB
	db     *sql.DB
}

func newPruneLake(t *testing.T) *pruneLake {
	t.Helper()
	l := newIceLake(t, IcebergOptions{})
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "mirror.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE otel_spans (tenant_id VARCHAR, trace_id VARCHAR, name VARCHAR, duration_ms BIGINT, start_time TIMESTAMP, attributes JSON,
			ktopic VARCHAR, kpartition INTEGER, koffset BIGINT, kindex INTEGER)`); err != nil {
		t.Fatal(err)
	}
	p := &pruneLake{iceLake: l, db: db}
	p.mirrorSpans(t, baseSpans, 0)
	mirror, err := NewDuckDB(context.Background(), db, DuckDBOptions{Shared: []string{"genai_prices"}})
	if err != nil {
		t.Fatal(err)
	}
	p.mirror = mirror
	return p
}

// mirrorSpans inserts spans as load loads them from offset first.
func (p *pruneLake) mirrorSpans(t *testing.T, spans []span, first int64) {
	t.Helper()
	for i, s := range spans {
		// Microseconds since the epoch, as the sink is given them: the
		// infinities are DuckDB's.
		var at any = s.at.UnixMicro()
		if s.at.IsZero() {
			at = nil // no start: NULL, as loadBoth loads it
		}
		if _, err := p.db.Exec(`INSERT INTO otel_spans VALUES (?, ?, ?, ?, make_timestamp(?::BIGINT), json_object('k', ?), 'traces', 0, ?, 0)`,
			s.tenant, s.trace, s.name, s.ms, at, s.name, first+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// loadBoth loads spans into the lake and the mirror.
func (p *pruneLake) loadBoth(t *testing.T, spans []span) {
	t.Helper()
	first := p.next
	b := &sink.Batch{}
	for i, s := range spans {
		// JSON strings, not Go's (%q writes \U escapes JSON has not).
		var at any = s.at.UnixMicro()
		if s.at.IsZero() {
			at = nil // a span without a start
		}
		row, err := json.Marshal(map[string]any{"tenant_id": s.tenant, "trace_id": s.trace, "name": s.name, "duration_ms": s.ms,
			"start_time": at, "attributes": map[string]string{"k": s.name}, "ktopic": "traces", "kpartition": 0,
			"koffset": first + int64(i), "kindex": 0})
		if err != nil {
			t.Fatal(err)
		}
		b.Rows = append(append(b.Rows, row...), '\n')
	}
	p.next += int64(len(spans))
	b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: p.next - 1, Records: int64(len(spans))}}
	f, err := p.snk.Stage(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.snk.Load(context.Background(), []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	if err := p.reader.refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.mirrorSpans(t, spans, first)
}

// same runs q on both and reports a difference.
func (p *pruneLake) same(t *testing.T, s tenancy.Scope, q string, params ...any) bool {
	t.Helper()
	want, err := readRows(p.mirror, s, q, params...)
	if err != nil {
		// A query DuckDB refuses says nothing of pruning.
		return true
	}
	got, err := readRows(p.reader, s, q, params...)
	if err != nil {
		t.Errorf("%s for %s: %v (DuckDB answered %d rows)", q, s, err, len(want))
		return false
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s for %s:\n read %d rows %v\n want %d rows %v (DuckDB)", q, s, len(got), clip(got), len(want), clip(want))
		return false
	}
	return true
}

func clip(rows []string) []string {
	if len(rows) > 6 {
		return append(rows[:6:6], "…")
	}
	return rows
}

// nastyStrings share long prefixes (Iceberg keeps 16 characters of a
// string's bounds), end in multibyte characters at the truncation point,
// hold the largest code points (whose upper bound cannot be rounded up).
var nastyStrings = []string{
	"", "a", "A", "t1", "chat", "Chat", "o'q", "%", "_", "a%b", "a_b", "é", "ß",
	"0123456789abcdef", "0123456789abcdefg", "0123456789abcdef0", "0123456789abcdeg", "0123456789abcde\u00e9", "0123456789abcde\u00e9x",
	"0123456789abcde\u20ac", "0123456789abcde\U0001F600", "0123456789abcde\U0001F600z", "0123456789abcde\U0010FFFF", "0123456789abcde\U0010FFFFa",
	strings.Repeat("\U0010FFFF", 17), strings.Repeat("\U0010FFFF", 16) + "a", strings.Repeat("\U0010FFFF", 15) + "\uD7FF" + "z", "0123456789abcde\uD7FFq",
	"0123456789abcde\uFFFF", "0123456789abcde\uFFFFa", strings.Repeat("z", 40), strings.Repeat("z", 16) + "\U0010FFFF",
	"\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff\u00ff", "日本語のテキストです日本語のテキストです",
}

var nastyInts = []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, math.MaxInt64 - 1, 0, -1, 1, math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1, 1 << 53, 1<<53 + 1}

// nastyTimes sit on day boundaries, before 1970, a microsecond apart.
var nastyTimes = func() []time.Time {
	base := []time.Time{
		time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 2, 0, 0, 0, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC),
	}
	var out []time.Time
	for _, b := range base {
		out = append(out, b, b.Add(-time.Microsecond), b.Add(time.Microsecond), b.Add(time.Hour))
	}
	return out
}()

// TestIcebergPruningKeepsEveryRowItMatches loads spans of nasty values,
// a few per file, and compares the answers of random predicates on each
// pushable column (constants of every form the reader pushes, and some it
// does not) with DuckDB's over the same rows, unpruned: a file or row
// group skipped by partition, column bounds (truncated strings), a bloom
// filter or a dictionary that held a matching row shows as a missing row.
func TestIcebergPruningKeepsEveryRowItMatches(t *testing.T) {
	t.Run("loaded", func(t *testing.T) { pruningKeepsEveryRowItMatches(t, false, 1, 120) })
	t.Run("compacted", func(t *testing.T) { pruningKeepsEveryRowItMatches(t, true, 3, 120) })
}

// pruningKeepsEveryRowItMatches runs queries random predicates on the
// spans of 8 loads (after compacting them, with 2 more loads beside, when
// compactFirst), from seed.
func pruningKeepsEveryRowItMatches(t *testing.T, compactFirst bool, seed uint64, queries int) {
	p := newPruneLake(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	tenants := []string{"a", "b", "o'q", "%", "_"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for range 8 {
		var spans []span
		for range 40 {
			spans = append(spans, span{pick(tenants), pick(nastyStrings), pick(nastyStrings), nastyInts[rng.IntN(len(nastyInts))],
				nastyTimes[rng.IntN(len(nastyTimes))]})
		}
		p.loadBoth(t, spans)
	}
	if compactFirst {
		// Each partition's files into one, sorted by tenant and trace id,
		// with a bloom filter on trace_id; then more files beside them.
		if _, err := p.snk.Compact(context.Background(), 1<<20, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), false); err != nil {
			t.Fatal(err)
		}
		if err := p.reader.refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			var spans []span
			for range 40 {
				spans = append(spans, span{pick(tenants), pick(nastyStrings), pick(nastyStrings), nastyInts[rng.IntN(len(nastyInts))],
					nastyTimes[rng.IntN(len(nastyTimes))]})
			}
			p.loadBoth(t, spans)
		}
		if !p.same(t, tenancy.Operator, "SELECT tenant_id, trace_id, name, duration_ms, start_time, koffset FROM otel_spans") {
			t.Fatal("compaction changed the rows")
		}
	}
	lit := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
	strConst := func() string {
		v := pick(nastyStrings)
		switch rng.IntN(4) {
		case 0:
			return "concat(" + lit(v) + ", '')"
		case 1:
			return lit(v) + "::VARCHAR"
		}
		return lit(v)
	}
	intConst := func() string {
		v := nastyInts[rng.IntN(len(nastyInts))]
		switch rng.IntN(5) {
		case 0:
			return fmt.Sprintf("%d::BIGINT", v)
		case 1:
			return fmt.Sprintf("(%d)", v)
		case 2:
			if v > math.MinInt64 {
				return fmt.Sprintf("%d + 1", v-1)
			}
		}
		return fmt.Sprint(v)
	}
	tsConst := func() string {
		at := nastyTimes[rng.IntN(len(nastyTimes))].Add(time.Duration(rng.IntN(3)-1) * time.Microsecond)
		s := at.Format("2006-01-02 15:04:05.999999")
		switch rng.IntN(7) {
		case 0:
			return "TIMESTAMP " + lit(s)
		case 1:
			return "DATE " + lit(at.Format("2006-01-02"))
		case 2:
			return lit(at.Format("2006-01-02T15:04:05.999999999Z"))
		case 3:
			return fmt.Sprintf("make_timestamp(%d)", at.UnixMicro())
		case 4:
			return "TIMESTAMP " + lit(s) + " + INTERVAL 1 DAY"
		case 5:
			return lit(at.Format("2006-01-02 15:04:05.999999") + "+01")
		}
		return lit(s)
	}
	columns := []struct {
		name  string
		value func() string
	}{
		{"tenant_id", func() string { return lit(pick(tenants)) }},
		{"trace_id", strConst}, {"name", strConst},
		{"duration_ms", intConst}, {"koffset", intConst}, {"kpartition", intConst},
		{"start_time", tsConst},
	}
	ops := []string{"=", "<", "<=", ">", ">="}
	predicate := func() string {
		c := columns[rng.IntN(len(columns))]
		switch rng.IntN(8) {
		case 0:
			return fmt.Sprintf("%s BETWEEN %s AND %s", c.name, c.value(), c.value())
		case 1:
			return fmt.Sprintf("%s IN (%s, %s, %s)", c.name, c.value(), c.value(), c.value())
		case 2:
			return fmt.Sprintf("%s %s %s", c.value(), ops[rng.IntN(len(ops))], c.name)
		}
		return fmt.Sprintf("%s %s %s", c.name, ops[rng.IntN(len(ops))], c.value())
	}
	// An OR is pushed when each of its disjuncts has a condition the
	// scan takes (of one column or of several, IS NULL among them).
	disjunct := func() string {
		switch rng.IntN(4) {
		case 0:
			return []string{"start_time", "duration_ms", "name"}[rng.IntN(3)] + " IS NULL"
		case 1:
			return predicate() + " AND " + predicate()
		case 2:
			return "length(name) = 3" // pushed nowhere: the OR is not either
		}
		return predicate()
	}
	failures := 0
	for range queries {
		where := predicate()
		if rng.IntN(3) == 0 {
			where += " AND " + predicate()
		}
		if rng.IntN(3) == 0 {
			where = fmt.Sprintf("(%s OR %s)", where, disjunct())
			if rng.IntN(2) == 0 {
				where += " AND " + predicate()
			}
		}
		q := "SELECT tenant_id, trace_id, name, duration_ms, start_time FROM otel_spans WHERE " + where
		s := tenancy.Operator
		if rng.IntN(3) == 0 {
			s = tenancy.One(pick(tenants))
		}
		if !p.same(t, s, q) {
			if failures++; failures > 10 {
				t.Fatal("too many differences")
			}
		}
	}
}

// IS NULL is pushed to the scans (Tempo's trace by id reads the spans of
// a trace without a start so, beside its window): a file or row group it
// skips by Iceberg's null counts or a partition's nulls must hold no row
// without a start, and every such row is read, alone or beside the
// other conditions of the query.
func TestIcebergPruningByIsNullKeepsEveryRowItMatches(t *testing.T) {
	p := newPruneLake(t)
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	p.loadBoth(t, []span{{"a", "t1", "timed", 1, at}, {"a", "t2", "timed", 2, at.Add(time.Hour)}})
	p.loadBoth(t, []span{{"a", "t1", "no start", 3, time.Time{}}, {"b", "t1", "no start", 4, time.Time{}}, {"a", "t3", "timed", 5, at}})
	p.loadBoth(t, []span{{"a", "t2", "timed", 6, at.Add(48 * time.Hour)}})
	for _, q := range []string{
		"SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE start_time IS NULL",
		"SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE trace_id = 't1' AND start_time IS NULL",
		"SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE trace_id = 't2' AND start_time IS NULL",
		"SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE trace_id = 't1' AND start_time BETWEEN TIMESTAMP '2024-03-01' AND TIMESTAMP '2024-03-02' " +
			"UNION ALL SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE trace_id = 't1' AND start_time IS NULL",
		"SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE duration_ms IS NULL",
	} {
		for _, s := range []tenancy.Scope{tenancy.Operator, tenancy.One("a")} {
			p.same(t, s, q)
		}
	}
	var n int
	if err := p.db.QueryRow("SELECT count(*) FROM otel_spans WHERE start_time IS NULL").Scan(&n); err != nil || n != 2 {
		t.Fatalf("the mirror holds %d spans without a start (%v), want 2", n, err)
	}
}

// IS NULL does not reject NULL: on the side of an outer join that the
// join fills with NULLs (LEFT JOIN's right, RIGHT JOIN's left, both of a
// FULL one), a WHERE … IS NULL above the join is true of the row the
// join makes for an unmatched row, so it may not be pushed to that
// side's scan. Pushed (beside a condition with a value, which pushes the
// scan's conditions), it pruned that side's files of spans with a start
// and the anti-join answered their rows as unmatched.
func TestIcebergIsNullNotPushedToOuterJoinsNullSide(t *testing.T) {
	p := newPruneLake(t)
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	p.loadBoth(t, []span{{"a", "t1", "timed", 1, at}, {"a", "t2", "timed", 2, at.Add(time.Hour)}})
	p.loadBoth(t, []span{{"a", "t1", "no start", 3, time.Time{}}, {"a", "t9", "no start", 4, time.Time{}}})
	for _, q := range []string{
		// t2's spans have a start: no row.
		"SELECT a.name, b.name FROM otel_spans a LEFT JOIN otel_spans b USING (trace_id) WHERE trace_id = 't2' AND b.start_time IS NULL",
		"SELECT a.name, b.name FROM otel_spans b RIGHT JOIN otel_spans a USING (trace_id) WHERE trace_id IN ('t1', 't2') AND b.start_time IS NULL",
		"SELECT a.name, b.name FROM otel_spans a FULL JOIN otel_spans b ON a.trace_id = b.trace_id WHERE b.trace_id = 't2' AND a.start_time IS NULL",
		"SELECT n.trace_id FROM (SELECT 't1' AS trace_id UNION ALL SELECT 't2' UNION ALL SELECT 'zz') n " +
			"LEFT JOIN (otel_spans s JOIN (SELECT 1 AS one) x ON s.trace_id IN ('t1', 't2', 't9')) ON s.trace_id = n.trace_id WHERE s.start_time IS NULL",
	} {
		for _, s := range []tenancy.Scope{tenancy.Operator, tenancy.One("a")} {
			p.same(t, s, q)
		}
	}
}

// A scan whose only condition is IS NULL is pruned by it too: Tempo's
// search and metrics in a window read a trace's spans without a start in
// a branch of their own (start_time IS NULL AND trace_id IN (a
// subquery)), whose scan then opened every data file of the table, for
// every search, where the window's scans open those of the window.
func TestIcebergIsNullAlonePrunes(t *testing.T) {
	p := newPruneLake(t)
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	p.loadBoth(t, []span{{"a", "t1", "timed", 1, at}, {"a", "t1", "no start", 2, time.Time{}}})
	p.loadBoth(t, []span{{"a", "t2", "timed", 3, at.Add(48 * time.Hour)}})
	p.loadBoth(t, []span{{"a", "t3", "timed", 4, at.Add(96 * time.Hour)}})
	for _, q := range []string{
		"SELECT trace_id, name FROM otel_spans WHERE start_time IS NULL",
		"SELECT trace_id, name FROM otel_spans WHERE start_time IS NULL AND trace_id IN (SELECT trace_id FROM otel_spans WHERE start_time >= TIMESTAMP '2024-03-01')",
	} {
		p.takeScans()
		if !p.same(t, tenancy.One("a"), q) {
			continue
		}
		for _, s := range p.takeScans() {
			// The scan of the spans without a start: not the
			// subquery's, of the spans since March 1st.
			if !strings.Contains(s.Filter, "GreaterThanEqual") && s.Files != 1 {
				t.Errorf("%s: the scan of the spans without a start opened %d files (filter %s), want the one holding one", q, s.Files, s.Filter)
			}
		}
	}
}

// An OR of conditions the scan takes prunes as each does: Tempo's trace
// by id reads a trace's spans without a start by one condition, those
// ending from the window's start on or without an end (end_time IS NULL
// OR end_time BETWEEN …), where a branch (a scan) for each disjunct cost
// DuckDB's planning of a third scan per trace. Not pushed, the scan opened
// every file holding a span without a start, wherever it ended.
func TestIcebergOrPrunesAsItsDisjuncts(t *testing.T) {
	p := newPruneLake(t)
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	p.loadBoth(t, []span{{"a", "t1", "timed", 1, at}, {"a", "t1", "no start", 2, time.Time{}}})
	p.loadBoth(t, []span{{"a", "t2", "timed", 3, at.Add(48 * time.Hour)}})
	p.loadBoth(t, []span{{"a", "t3", "timed", 4, at.Add(96 * time.Hour)}})
	files := func(q string) int {
		t.Helper()
		p.takeScans()
		if !p.same(t, tenancy.One("a"), q) {
			return -1
		}
		scans := p.takeScans()
		if len(scans) != 1 {
			t.Fatalf("%s: scans %+v, want one", q, scans)
		}
		return scans[0].Files
	}
	const sel = "SELECT trace_id, name FROM otel_spans WHERE "
	all := files("SELECT trace_id, name FROM otel_spans")
	// Each case's disjuncts hold rows of distinct files: the OR opens
	// theirs, fewer than all.
	for _, disjuncts := range [][]string{
		{"start_time IS NULL", "start_time >= TIMESTAMP '2024-03-04'"},
		{"start_time IS NULL", "start_time BETWEEN TIMESTAMP '2024-03-03' AND TIMESTAMP '2024-03-04'"},
		{"duration_ms = 3", "start_time > TIMESTAMP '2024-03-04' AND duration_ms >= 4"},
	} {
		want := 0
		for _, d := range disjuncts {
			want += files(sel + d)
		}
		q := sel + strings.Join(disjuncts, " OR ")
		if got := files(q); got != want || got >= all {
			t.Errorf("%s: opened %d files, want %d of %d (its disjuncts')", q, got, want, all)
		}
	}
	// A disjunct the scan does not take: every file.
	q := sel + "start_time IS NULL OR length(name) = 99"
	if got := files(q); got != all {
		t.Errorf("%s: opened %d files, want all %d", q, got, all)
	}
}
