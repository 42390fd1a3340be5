package query

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// The lake's typed tables, as the Iceberg sink writes them: partitioned by
// tenant and by the day of start_time.
var (
	spansTable = schema.Table{Name: "otel_spans", Tenant: "tenant_id", Time: "start_time", Columns: []schema.Column{
		{Name: "tenant_id", Type: schema.String}, {Name: "trace_id", Type: schema.String}, {Name: "name", Type: schema.String},
		{Name: "duration_ms", Type: schema.Int64}, {Name: "start_time", Type: schema.Timestamp}, {Name: "attributes", Type: schema.JSON},
	}}
	opsTable = schema.Table{Name: "genai_operations", Tenant: "tenant_id", Time: "start_time", Columns: []schema.Column{
		{Name: "tenant_id", Type: schema.String}, {Name: "trace_id", Type: schema.String}, {Name: "input_tokens", Type: schema.Int64},
		{Name: "cost", Type: schema.Decimal}, {Name: "start_time", Type: schema.Timestamp},
	}}
)

// iceLake is an Iceberg catalog (SQLite) and warehouse (a directory)
// holding what newLake's DuckDB database holds: otel_spans and
// genai_operations loaded by the sink, events (raw, no tenant_id) and the
// shared genai_prices made beside them, and the spans' dead-letter table
// served as events_ledger; and a reader of them.
type iceLake struct {
	dir    string
	snk    *iceberg.Sink
	reader *Iceberg
	next   int64 // the next Kafka offset to load
	// refresh: load makes the reader see the commit at once.
	refresh bool

	mu      sync.Mutex
	scans   []ScanStats
	scanned int64 // rows the scans handed to DuckDB
}

// day is a day of the lake's rows.
func day(n int) time.Time { return time.Date(2024, 3, n, 0, 0, 0, 0, time.UTC) }

var baseSpans = []span{
	{"a", "t1", "chat", 10, day(1).Add(10 * time.Hour)},
	{"a", "t1", "tool", 5, day(1).Add(11 * time.Hour)},
	{"b", "t2", "secret-b", 99, day(1).Add(12 * time.Hour)},
}

var baseOps = []op{
	{"a", "t1", 100, "0.5", day(1).Add(10 * time.Hour)},
	{"b", "t2", 7777, "9.25", day(1).Add(12 * time.Hour)},
}

func newIceLake(t testing.TB, opt IcebergOptions) *iceLake {
	t.Helper()
	dir := t.TempDir()
	writeLakeFiles(t, dir)
	l := &iceLake{dir: dir, snk: openLakeSink(t, dir)}
	l.load(t, baseSpans, baseOps)
	l.create(t, "events", iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "record_metadata", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "record_content", Type: iceberggo.PrimitiveTypes.String},
	), `[{"record_metadata": "{}", "record_content": "{\"tenant\":\"b\",\"secret\":\"raw-b\"}"}]`)
	l.create(t, "genai_prices", iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "model", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "input_per_mtok", Type: iceberggo.PrimitiveTypes.Float64},
	), `[{"model": "gpt", "input_per_mtok": 1.5}]`)
	l.reader = l.open(t, opt)
	l.refresh = true
	return l
}

// openLakeSink opens the sink of the lake in dir, creating its tables.
func openLakeSink(t testing.TB, dir string) *iceberg.Sink {
	t.Helper()
	snk, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "otel_spans", Typed: &spansTable, Derived: &opsTable, DerivedTable: "genai_operations"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	if err := snk.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return snk
}

// open opens a reader of the lake's tables, counting its scans.
func (l *iceLake) open(t testing.TB, opt IcebergOptions) *Iceberg {
	t.Helper()
	opt.Shared = []string{"genai_prices"}
	opt.OnScan = func(s ScanStats) {
		l.mu.Lock()
		l.scans = append(l.scans, s)
		l.mu.Unlock()
	}
	id := func(name string) table.Identifier { return table.Identifier{"tracelake", name} }
	r, err := NewIceberg(context.Background(), l.snk.Catalog(), []IcebergTable{
		{Name: "otel_spans", ID: id("otel_spans"), Columns: []schema.SinkColumn{{Name: "attributes", Type: "JSON"}}},
		{Name: "genai_operations", ID: id("genai_operations")},
		{Name: "events", ID: id("events"), Columns: []schema.SinkColumn{{Name: "record_metadata", Type: "JSON"}, {Name: "record_content", Type: "JSON"}}},
		{Name: "events_ledger", ID: id("otel_spans_dlq")},
		{Name: "genai_prices", ID: id("genai_prices")},
	}, opt)
	if err != nil {
		t.Fatal(err)
	}
	r.scanned = func(rows int64) {
		l.mu.Lock()
		l.scanned += rows
		l.mu.Unlock()
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// create makes table name with schema sc and the rows of a JSON array.
func (l *iceLake) create(t testing.TB, name string, sc *iceberggo.Schema, rows string) {
	t.Helper()
	ctx := context.Background()
	tbl, err := l.snk.Catalog().CreateTable(ctx, table.Identifier{"tracelake", name}, sc)
	if err != nil {
		t.Fatal(err)
	}
	as, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	at := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
	defer at.Release()
	if _, err := tbl.AppendTable(ctx, at, 1000, nil); err != nil {
		t.Fatal(err)
	}
}

type span struct {
	tenant, trace, name string
	ms                  int64
	at                  time.Time
}

type op struct {
	tenant, trace string
	tokens        int64
	cost          string
	at            time.Time
}

// load loads spans and operations in one commit, as `tracelake run` does
// a batch of OTLP records: a file per partition (tenant, day) of each
// table.
func (l *iceLake) load(t testing.TB, spans []span, ops []op) {
	t.Helper()
	b := &sink.Batch{}
	first := l.next
	for i, s := range spans {
		b.Rows = fmt.Appendf(b.Rows, `{"tenant_id":%q,"trace_id":%q,"name":%q,"duration_ms":%d,"start_time":%d,"attributes":{"k":%q},"ktopic":"traces","kpartition":0,"koffset":%d,"kindex":0}`+"\n",
			s.tenant, s.trace, s.name, s.ms, s.at.UnixMicro(), s.name, first+int64(i))
	}
	for i, o := range ops {
		b.Derived = fmt.Appendf(b.Derived, `{"tenant_id":%q,"trace_id":%q,"input_tokens":%d,"cost":%q,"start_time":%d,"ktopic":"traces","kpartition":0,"koffset":%d,"kindex":1}`+"\n",
			o.tenant, o.trace, o.tokens, o.cost, o.at.UnixMicro(), first+int64(i%len(spans)))
	}
	l.next += int64(len(spans))
	b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: l.next - 1, Records: int64(len(spans))}}
	f, err := l.snk.Stage(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.snk.Load(context.Background(), []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	if l.reader != nil && l.refresh {
		// Now rather than at the next refresh.
		if err := l.reader.refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// rows runs q for s and returns its rows, each cell printed, or the error.
func (l *iceLake) rows(t testing.TB, s tenancy.Scope, q string, params ...any) ([]string, error) {
	t.Helper()
	return readRows(l.reader, s, q, params...)
}

// readRows runs q for s on r and returns its rows, each cell printed.
func readRows(r Reader, s tenancy.Scope, q string, params ...any) ([]string, error) {
	rr, err := r.Query(context.Background(), s, q, params...)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []string
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			cells := make([]string, rec.NumCols())
			for c, col := range rec.Columns() {
				// A copy: the value is the batch's memory, freed with it.
				cells[c] = strings.Clone(col.ValueStr(i))
			}
			out = append(out, strings.Join(cells, "|"))
		}
	}
	return out, rr.Err()
}

// takeScans returns the scans planned since the last call.
func (l *iceLake) takeScans() []ScanStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.scans
	l.scans = nil
	return s
}

func TestIcebergTenantReadsItsOwnRows(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	tenantReadsItsOwnRows(t, func(s tenancy.Scope, q string, params ...any) ([]string, error) { return l.rows(t, s, q, params...) })
	// The columns have the DuckDB sink's types: JSON, a plain TIMESTAMP
	// (UTC), DECIMAL(18,12).
	got, err := l.rows(t, tenantA, `SELECT attributes->>'k', typeof(attributes), typeof(s.start_time), s.start_time, typeof(o.cost)
		FROM otel_spans s JOIN genai_operations o USING (trace_id) WHERE name = $1`, "chat")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chat|JSON|TIMESTAMP|2024-03-01T10:00:00|DECIMAL(18,12)"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	// The shared table, whole.
	got, err = l.rows(t, tenantB, `SELECT model, input_per_mtok FROM genai_prices`)
	if err != nil || !slices.Equal(got, []string{"gpt|1.5"}) {
		t.Fatalf("tenant b read the prices %v, %v", got, err)
	}
}

// TestIcebergTenantEscapes: see tenantEscapes.
func TestIcebergTenantEscapes(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	tenantEscapes(t, l.dir, func(t *testing.T, q string) ([]string, error) { return l.rows(t, tenantA, q) })
}

func TestIcebergOperatorReadsEveryTable(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	got, err := l.rows(t, tenancy.Operator, `SELECT (SELECT count(*) FROM otel_spans), (SELECT count(DISTINCT tenant_id) FROM genai_operations),
		(SELECT record_content->>'secret' FROM events), (SELECT count(*) FROM events_ledger), (SELECT count(*) FROM genai_prices)`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"3|2|raw-b|0|1"}; !slices.Equal(got, want) {
		t.Fatalf("operator read %v, want %v", got, want)
	}
	for _, s := range l.takeScans() {
		if s.Filter != "AlwaysTrue()" {
			t.Errorf("the operator's scan of %s filtered %s", s.Table, s.Filter)
		}
	}
}

// TestIcebergPrunesFiles: a query for one tenant and one day opens the
// files of that partition alone; a predicate on another column skips the
// files whose bounds exclude it.
func TestIcebergPrunesFiles(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	// Two loads of 3 tenants × 3 days: two files in each of 9 partitions
	// (beside the base rows' of day 1), the second load's spans longer.
	for load := range 2 {
		var spans []span
		for _, tenant := range []string{"a", "b", "c"} {
			for d := 2; d <= 4; d++ {
				for i := range 5 {
					spans = append(spans, span{tenant, fmt.Sprintf("t%d%d", d, i), fmt.Sprintf("op%d", i), int64(1000*load + i), day(d).Add(time.Duration(i) * time.Hour)})
				}
			}
		}
		l.load(t, spans, nil)
	}
	l.takeScans()
	check := func(s tenancy.Scope, q string, wantRows []string, wantFiles int, params ...any) {
		t.Helper()
		got, err := l.rows(t, s, q, params...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, wantRows) {
			t.Errorf("%s: read %v, want %v", q, got, wantRows)
		}
		scans := l.takeScans()
		if len(scans) != 1 || scans[0].Files != wantFiles {
			t.Errorf("%s for %s: scans %+v, want one of %d files", q, s, scans, wantFiles)
		}
	}
	check(tenantA, `SELECT count(*) FROM otel_spans WHERE start_time >= TIMESTAMP '2024-03-03' AND start_time < TIMESTAMP '2024-03-04'`, []string{"10"}, 2)
	check(tenantA, `SELECT count(*) FROM otel_spans WHERE start_time BETWEEN '2024-03-03' AND DATE '2024-03-03' + INTERVAL 20 HOUR`, []string{"10"}, 2)
	check(tenantA, `SELECT count(*) FROM otel_spans`, []string{"32"}, 7)
	check(tenancy.Operator, `SELECT count(*) FROM otel_spans WHERE tenant_id = 'c' AND start_time >= '2024-03-04'`, []string{"10"}, 2)
	// Column bounds: only the second load's files hold durations ≥ 1000.
	check(tenantA, `SELECT count(*) FROM otel_spans WHERE duration_ms >= 1000`, []string{"15"}, 3)
	check(tenantA, `SELECT count(*) FROM otel_spans s WHERE s.duration_ms IN (1001, 1002) AND s.start_time < '2024-03-03'`, []string{"2"}, 1)
	// No file's trace ids reach past 't9…'.
	check(tenancy.Operator, `SELECT count(*) FROM otel_spans WHERE trace_id > 'zzz'`, []string{"0"}, 0)
	// Free text is not pushed: a long value loses its chunk's bounds
	// (boundedStrings), so a predicate on it reads every file.
	check(tenancy.Operator, `SELECT count(*) FROM otel_spans WHERE name > 'zzz'`, []string{"0"}, 20)
	// Parameters prune as constants do (trace by id: the id and the
	// window are parameters), whichever of them the predicates use.
	check(tenantA, `SELECT count(*) FROM otel_spans WHERE trace_id = $1 AND start_time BETWEEN make_timestamp($2) AND make_timestamp($3)`,
		[]string{"2"}, 2, "t31", day(3).UnixMicro(), day(4).UnixMicro()-1)
	check(tenantA, `SELECT count(*) FROM otel_spans WHERE trace_id = $2 AND duration_ms < $1`, []string{"1"}, 1, 1000, "t31")
	check(tenantA, `SELECT $1, count(*) FROM otel_spans WHERE trace_id = $2`, []string{"x|2"}, 2, "x", "t31")
}

// TestIcebergScanStatsCountFiles: a file iceberg-go splits into several
// tasks (its row groups, read.split.target-size apart) is one file of the
// scan's stats, its rows counted once. (They were counted per task: a
// 448 MB compacted file of 5M spans read as 2 files and 10M rows.)
func TestIcebergScanStatsCountFiles(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	l.withSpansProperties(t, iceberggo.Properties{table.ParquetRowGroupLimitKey: "10", table.ReadSplitTargetSizeKey: "1"})
	spans := make([]span, 50)
	for i := range spans {
		spans[i] = span{"c", "t", "n", int64(i), day(7)}
	}
	l.load(t, spans, nil)
	l.takeScans()
	got, err := l.rows(t, tenancy.Operator, `SELECT count(*) FROM otel_spans WHERE tenant_id = 'c'`)
	if err != nil || !slices.Equal(got, []string{"50"}) {
		t.Fatalf("read %v, %v; want 50", got, err)
	}
	if scans := l.takeScans(); len(scans) != 1 || scans[0].Files != 1 || scans[0].Rows != 50 {
		t.Fatalf("scans %+v, want one of 1 file and 50 rows", scans)
	}
}

// TestIcebergSeesNewSnapshots: a reader opened before a commit sees it
// once it has refreshed.
func TestIcebergSeesNewSnapshots(t *testing.T) {
	l := newIceLake(t, IcebergOptions{Refresh: 50 * time.Millisecond})
	l.refresh = false
	count := func() string {
		got, err := l.rows(t, tenantA, `SELECT count(*) FROM otel_spans`)
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	if n := count(); n != "2" {
		t.Fatalf("tenant a has %s spans, want 2", n)
	}
	l.load(t, []span{{"a", "t9", "later", 1, day(5)}}, nil)
	for deadline := time.Now().Add(10 * time.Second); count() != "3"; {
		if time.Now().After(deadline) {
			t.Fatal("the reader did not see the new snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIcebergStreams: a large table reaches DuckDB as it is read, a batch
// at a time, not copied first: while the query runs, DuckDB holds a few of
// the scan's batches at once, never most of the table. (duckdb-go hands
// the client a query's result when it is complete, for either reader: a
// SELECT * of the table would be held whole there, not by the scan.)
func TestIcebergStreams(t *testing.T) {
	l := newIceLake(t, IcebergOptions{ScanConcurrency: 1, BatchRows: 4096, Threads: 2})
	mem := &peakAllocator{}
	l.reader.mem = mem
	const perLoad, loads = 100_000, 3
	for n := range loads {
		spans := make([]span, perLoad)
		for i := range spans {
			spans[i] = span{"a", "bulk", "n", int64(n*perLoad + i), day(2)}
		}
		l.load(t, spans, nil)
	}
	got, err := l.rows(t, tenantA, `SELECT count(*), sum(duration_ms) FROM otel_spans WHERE trace_id = 'bulk'`)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d|%d", perLoad*loads, perLoad*loads*(perLoad*loads-1)/2); !slices.Equal(got, []string{want}) {
		t.Fatalf("read %v, want %s", got, want)
	}
	l.mu.Lock()
	scanned := l.scanned
	l.mu.Unlock()
	// The filler field is 16 bytes a row of each batch DuckDB holds.
	held := mem.peak.Load() / 16
	if scanned != perLoad*loads || held > scanned/4 {
		t.Fatalf("the scan handed DuckDB %d rows, %d of them at once", scanned, held)
	}
	if mem.current.Load() != 0 {
		t.Errorf("%d bytes of the scan still held after the query", mem.current.Load())
	}
}

// peakAllocator counts the bytes it holds, and the most it held.
type peakAllocator struct{ current, peak atomic.Int64 }

func (a *peakAllocator) Allocate(n int) []byte {
	c := a.current.Add(int64(n))
	for p := a.peak.Load(); c > p && !a.peak.CompareAndSwap(p, c); p = a.peak.Load() {
	}
	return memory.DefaultAllocator.Allocate(n)
}

func (a *peakAllocator) Reallocate(n int, b []byte) []byte {
	a.Free(b)
	out := a.Allocate(n)
	copy(out, b)
	return out
}

func (a *peakAllocator) Free(b []byte) { a.current.Add(-int64(len(b))) }

func TestIcebergSchemaAndTables(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	tables := schemaAndTablesAreScoped(t, l.reader)
	s, err := l.reader.Schema(context.Background(), tenantA, `SELECT start_time, attributes FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	if ts, ok := s.Field(0).Type.(*arrow.TimestampType); !ok || ts.TimeZone != "" || ts.Unit != arrow.Microsecond {
		t.Errorf("start_time is %s, want a plain timestamp[us] as the DuckDB sink's", s.Field(0).Type)
	}
	spans := tables[2].Schema
	if spans.NumFields() != len(spansTable.AllColumns()) || spans.Field(0).Name != "tenant_id" {
		t.Errorf("otel_spans' columns: %v", spans)
	}
	if scans := l.takeScans(); len(scans) != 0 {
		t.Fatalf("Schema and Tables planned scans: %+v", scans)
	}
}

// TestIcebergAnswersAsDuckDB runs queries whose predicates sit where a
// scan may or may not apply them on the same rows in Iceberg and in
// DuckDB: the answers must be the same (a predicate pushed where it
// changes which rows the query keeps would show), for a tenant and the
// operator.
func TestIcebergAnswersAsDuckDB(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "mirror.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE otel_spans (tenant_id VARCHAR, trace_id VARCHAR, name VARCHAR, duration_ms BIGINT, start_time TIMESTAMP, attributes JSON,
			ktopic VARCHAR, kpartition INTEGER, koffset BIGINT, kindex INTEGER)`,
		`CREATE TABLE genai_operations (tenant_id VARCHAR, trace_id VARCHAR, input_tokens BIGINT, cost DECIMAL(18,12), start_time TIMESTAMP,
			ktopic VARCHAR, kpartition INTEGER, koffset BIGINT, kindex INTEGER)`,
		`CREATE TABLE genai_prices (model VARCHAR, input_per_mtok DOUBLE)`,
		`INSERT INTO genai_prices VALUES ('gpt', 1.5)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	spans, ops := slices.Clone(baseSpans), slices.Clone(baseOps)
	more := func(ss []span, oo []op) {
		l.load(t, ss, oo)
		spans, ops = append(spans, ss...), append(ops, oo...)
	}
	for d := 1; d <= 3; d++ {
		var ss []span
		var oo []op
		for _, tenant := range []string{"a", "b", "c"} {
			for i := range 4 {
				at := day(d).Add(time.Duration(6*i+d) * time.Hour)
				ss = append(ss, span{tenant, fmt.Sprintf("t%d", i), fmt.Sprintf("s%d", i), int64(10*d + i), at})
				// An hour before the span, a minute off the base rows' (ASOF
				// has no tie to break).
				oo = append(oo, op{tenant, fmt.Sprintf("t%d", i), int64(100 * (i + d)), fmt.Sprintf("%d.%d", d, i), at.Add(-time.Hour - time.Minute)})
			}
		}
		more(ss, oo)
	}
	first := int64(0)
	for _, s := range spans {
		if _, err := db.Exec(`INSERT INTO otel_spans VALUES (?, ?, ?, ?, ?, json_object('k', ?), 'traces', 0, ?, 0)`,
			s.tenant, s.trace, s.name, s.ms, s.at, s.name, first); err != nil {
			t.Fatal(err)
		}
		first++
	}
	for _, o := range ops {
		if _, err := db.Exec(`INSERT INTO genai_operations VALUES (?, ?, ?, ?::DECIMAL(18,12), ?, 'traces', 0, 0, 1)`,
			o.tenant, o.trace, o.tokens, o.cost, o.at); err != nil {
			t.Fatal(err)
		}
	}
	mirror, err := NewDuckDB(context.Background(), db, DuckDBOptions{Shared: []string{"genai_prices"}})
	if err != nil {
		t.Fatal(err)
	}
	queries := []string{
		`SELECT name FROM otel_spans WHERE duration_ms > 11`,
		`SELECT name FROM otel_spans WHERE 11 < duration_ms AND duration_ms <= 31`,
		`SELECT name FROM otel_spans WHERE duration_ms BETWEEN 12 AND 22`,
		`SELECT name, trace_id FROM otel_spans WHERE name IN ('chat', 's2') AND trace_id = 't2'`,
		`SELECT name FROM otel_spans WHERE start_time >= '2024-03-02'`,
		`SELECT name FROM otel_spans WHERE start_time < DATE '2024-03-02' + 1`,
		`SELECT name FROM otel_spans WHERE start_time >= TIMESTAMP '2024-03-03' - INTERVAL 1 DAY AND start_time < '2024-03-03'`,
		`SELECT name FROM otel_spans WHERE start_time = TIMESTAMP '2024-03-01 10:00:00'`,
		`SELECT name FROM otel_spans WHERE duration_ms = 10.5 OR duration_ms = 12.0`,
		`SELECT name FROM otel_spans WHERE duration_ms > NULL`,
		`SELECT name FROM otel_spans WHERE name > 's1' AND name < 'tool'`,
		`SELECT name FROM otel_spans WHERE NOT (duration_ms > 20) AND name <> 'chat'`,
		`SELECT name FROM otel_spans WHERE duration_ms > 30 OR name = 'tool'`,
		`SELECT NAME FROM OTEL_SPANS WHERE Duration_MS >= 32`,
		`SELECT name FROM otel_spans WHERE name = $1`,
		`SELECT duration_ms * 100 AS duration_ms FROM otel_spans WHERE duration_ms > 30`,
		`SELECT s.name FROM otel_spans s WHERE s.duration_ms > 30`,
		`SELECT otel_spans.name FROM otel_spans WHERE otel_spans.duration_ms > 30`,
		`SELECT s.name, o.input_tokens FROM otel_spans s LEFT JOIN genai_operations o ON o.trace_id = s.trace_id AND o.tenant_id = s.tenant_id WHERE o.input_tokens > 350`,
		`SELECT s.name, o.input_tokens FROM otel_spans s LEFT JOIN genai_operations o ON o.trace_id = s.trace_id AND o.input_tokens > 350`,
		`SELECT s.name, o.input_tokens FROM otel_spans s LEFT JOIN genai_operations o ON o.trace_id = s.trace_id AND s.duration_ms > 30`,
		`SELECT s.name, o.input_tokens FROM otel_spans s RIGHT JOIN genai_operations o ON o.trace_id = s.trace_id AND s.duration_ms > 30 WHERE o.input_tokens < 300`,
		`SELECT trace_id, s.name, o.input_tokens FROM otel_spans s FULL JOIN genai_operations o USING (trace_id, tenant_id) WHERE trace_id = 't1'`,
		`SELECT s.name, o.input_tokens FROM otel_spans s JOIN genai_operations o ON s.trace_id = o.trace_id AND s.duration_ms > 30 AND o.input_tokens >= 400`,
		`SELECT s.name, o.input_tokens FROM otel_spans s ASOF JOIN genai_operations o ON s.tenant_id = o.tenant_id AND s.start_time >= o.start_time WHERE o.input_tokens < 300`,
		`SELECT s.name, o.input_tokens FROM otel_spans s ASOF LEFT JOIN genai_operations o ON s.tenant_id = o.tenant_id AND s.start_time >= o.start_time WHERE s.duration_ms > 30`,
		`SELECT name FROM otel_spans s SEMI JOIN genai_operations o ON s.trace_id = o.trace_id AND o.input_tokens > 500 WHERE s.duration_ms < 30`,
		`SELECT name FROM otel_spans s ANTI JOIN genai_operations o ON s.trace_id = o.trace_id AND o.input_tokens > 500 WHERE s.duration_ms > 20`,
		`SELECT a.name, b.name FROM otel_spans a JOIN otel_spans b ON a.trace_id = b.trace_id AND a.name < b.name WHERE b.duration_ms > 30`,
		`SELECT name FROM otel_spans WHERE duration_ms > 30 UNION ALL SELECT name FROM otel_spans WHERE duration_ms <= 11`,
		`WITH c AS (SELECT * FROM otel_spans WHERE duration_ms > 11) SELECT (SELECT count(*) FROM c), (SELECT max(duration_ms) FROM c), (SELECT min(name) FROM c WHERE duration_ms < 30)`,
		`WITH c AS (SELECT name, duration_ms FROM otel_spans) SELECT name FROM c WHERE duration_ms > 31`,
		`WITH RECURSIVE r(n, name) AS (SELECT 1, name FROM otel_spans WHERE duration_ms = 10
			UNION ALL SELECT n + 1, s.name FROM r JOIN otel_spans s ON s.duration_ms = 10 + n WHERE n < 3) SELECT n, name FROM r`,
		`SELECT name FROM otel_spans WHERE trace_id IN (SELECT trace_id FROM genai_operations WHERE input_tokens > 500)`,
		`SELECT name FROM otel_spans s WHERE EXISTS (SELECT 1 FROM genai_operations o WHERE o.trace_id = s.trace_id AND s.duration_ms > 30)`,
		`SELECT name FROM otel_spans s WHERE duration_ms > (SELECT avg(duration_ms) FROM otel_spans WHERE trace_id = s.trace_id)`,
		`SELECT a, b FROM otel_spans t(a, b, name) WHERE name = 's1'`,
		`SELECT #3 FROM otel_spans WHERE duration_ms > 30`,
		`SELECT * FROM otel_spans WHERE duration_ms > 30`,
		`SELECT * EXCLUDE (cost, koffset) FROM genai_operations WHERE input_tokens = 300`,
		`SELECT s FROM otel_spans s WHERE s.name = 'chat'`,
		`SELECT count(*) FROM otel_spans`,
		`SELECT count(*), sum(input_tokens) FROM genai_operations NATURAL JOIN otel_spans`,
		`SELECT attributes->>'k' FROM otel_spans WHERE attributes->>'k' = 's3'`,
		`SELECT name FROM otel_spans WHERE attributes = '{"k":"chat"}'`,
		`SELECT name FROM otel_spans WHERE attributes IS NULL OR duration_ms = 99`,
		`SELECT s.name, x.d FROM otel_spans s, LATERAL (SELECT s.duration_ms * 2 AS d) x WHERE s.duration_ms > 30`,
		`SELECT name, row_number() OVER (ORDER BY duration_ms) FROM otel_spans WHERE duration_ms > 30`,
		`SELECT name, input_per_mtok FROM otel_spans, genai_prices WHERE model = 'gpt' AND duration_ms = 33`,
		`SELECT count(*) FROM (SELECT * FROM otel_spans WHERE tenant_id = 'c') x WHERE x.duration_ms >= 30`,
		`SELECT name FROM otel_spans WHERE tenant_id = 'b'`,
		`SELECT sum(cost) FROM genai_operations WHERE cost > 2.1`,
	}
	for _, s := range []tenancy.Scope{tenantA, tenancy.Operator} {
		for _, q := range queries {
			var params []any
			if strings.Contains(q, "$1") {
				params = []any{"s2"}
			}
			want, err := readRows(mirror, s, q, params...)
			if err != nil {
				t.Fatalf("%s, in DuckDB: %v", q, err)
			}
			got, err := readRows(l.reader, s, q, params...)
			if err != nil {
				t.Errorf("%s for %s: %v", q, s, err)
				continue
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s for %s:\n read %v\n want %v (DuckDB)", q, s, got, want)
			}
		}
	}
}

// TestIcebergPushesWhatIsCertain: the filters each scan gets, for the
// operator (no tenant filter): a comparison of a column with constants
// where DuckDB drops every row it rejects, nothing elsewhere.
func TestIcebergPushesWhatIsCertain(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	gt := func(col string, v any) string {
		return fmt.Sprintf("GreaterThan(term=Reference(name='%s'), literal=%v)", col, v)
	}
	const all = "AlwaysTrue()"
	for _, c := range []struct {
		q      string
		want   []string // the filters of the query's scans, in the order of its references
		params []any
	}{
		{`SELECT 1 FROM otel_spans WHERE duration_ms > 5`, []string{gt("duration_ms", 5)}, nil},
		{`SELECT 1 FROM otel_spans WHERE 5 < duration_ms`, []string{gt("duration_ms", 5)}, nil},
		{`SELECT 1 FROM otel_spans WHERE duration_ms BETWEEN 5 AND 9`, []string{"And(left=GreaterThanEqual(term=Reference(name='duration_ms'), literal=5), right=LessThanEqual(term=Reference(name='duration_ms'), literal=9))"}, nil},
		{`SELECT 1 FROM otel_spans WHERE trace_id IN ('a', 'b') AND start_time >= DATE '2024-03-02'`,
			[]string{"And(left=In(term=Reference(name='trace_id'), {[a b]}), right=GreaterThanEqual(term=Reference(name='start_time'), literal=2024-03-02 00:00:00.000000))"}, nil},
		// Free text, whose long values lose their chunk's bounds, is not
		// pushed (boundedStrings).
		{`SELECT 1 FROM otel_spans WHERE name IN ('a', 'b') AND start_time >= DATE '2024-03-02'`,
			[]string{"GreaterThanEqual(term=Reference(name='start_time'), literal=2024-03-02 00:00:00.000000)"}, nil},
		{`SELECT 1 FROM otel_spans WHERE kpartition IN (1, 2, 3)`, []string{"In(term=Reference(name='kpartition'), {[1 2 3]})"}, nil},
		{`SELECT 1 FROM otel_spans WHERE start_time < TIMESTAMP '2024-03-02' + INTERVAL 1 HOUR`,
			[]string{"LessThan(term=Reference(name='start_time'), literal=2024-03-02 01:00:00.000000)"}, nil},
		{`SELECT 1 FROM otel_spans s JOIN genai_operations o ON o.trace_id = s.trace_id AND s.duration_ms > 5 WHERE o.input_tokens > 7`,
			[]string{gt("duration_ms", 5), gt("input_tokens", 7)}, nil},
		{`SELECT 1 FROM otel_spans a JOIN otel_spans b USING (trace_id) WHERE b.duration_ms > 5`, []string{all, gt("duration_ms", 5)}, nil},
		// The null-supplying side of an outer join takes the WHERE, the
		// preserved side not the ON.
		{`SELECT 1 FROM otel_spans s LEFT JOIN genai_operations o ON o.trace_id = s.trace_id AND s.duration_ms > 5 WHERE o.input_tokens > 7`,
			[]string{all, gt("input_tokens", 7)}, nil},
		{`SELECT 1 FROM otel_spans s ASOF JOIN genai_operations o ON s.start_time >= o.start_time WHERE s.duration_ms > 5 AND o.input_tokens > 7`, []string{all, all}, nil},
		{`SELECT 1 FROM otel_spans s SEMI JOIN genai_operations o USING (trace_id) WHERE s.duration_ms > 5`, []string{all, all}, nil},
		{`SELECT 1 FROM (SELECT * FROM otel_spans) x WHERE x.duration_ms > 5`, []string{all}, nil},
		{`SELECT 1 FROM otel_spans t(a, b) WHERE b = 'x'`, []string{all}, nil},
		{`SELECT 1 FROM otel_spans WHERE duration_ms > 5 OR name = 'x'`, []string{all}, nil},
		{`SELECT 1 FROM otel_spans WHERE duration_ms = 2.5`, []string{all}, nil},
		{`SELECT 1 FROM otel_spans WHERE start_time > now() - INTERVAL 1 HOUR`, []string{all}, nil},
		// A parameter is a constant of its value's type: pushed where a
		// constant of that type would be.
		{`SELECT 1 FROM otel_spans WHERE trace_id = $1`, []string{"Equal(term=Reference(name='trace_id'), literal=x)"}, []any{"x"}},
		{`SELECT 1 FROM otel_spans WHERE duration_ms > $2 AND trace_id < $1`, []string{"And(left=GreaterThan(term=Reference(name='duration_ms'), literal=5), right=LessThan(term=Reference(name='trace_id'), literal=x))"}, []any{"x", 5}},
		{`SELECT 1 FROM otel_spans WHERE duration_ms > ? AND trace_id = ?`, []string{"And(left=GreaterThan(term=Reference(name='duration_ms'), literal=5), right=Equal(term=Reference(name='trace_id'), literal=x))"}, []any{5, "x"}},
		{`SELECT 1 FROM otel_spans WHERE duration_ms > $1`, []string{all}, []any{"5"}},
		{`SELECT 1 FROM otel_spans WHERE duration_ms > $1`, []string{all}, []any{2.5}},
		{`SELECT 1 FROM otel_spans WHERE attributes = '{}'`, []string{all}, nil},
		{`SELECT 1 FROM otel_spans WHERE upper(name) = 'X'`, []string{all}, nil},
	} {
		l.takeScans()
		if _, err := l.rows(t, tenancy.Operator, c.q, c.params...); err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		var got []string
		for _, s := range l.takeScans() {
			got = append(got, sortedSets(s.Filter))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: filters\n%q\nwant\n%q", c.q, got, c.want)
		}
	}
}

// sortedSets sorts the values of the sets Iceberg prints ({[b a]}), which
// it prints in no set order.
func sortedSets(filter string) string {
	return regexp.MustCompile(`\{\[[^]]*\]\}`).ReplaceAllStringFunc(filter, func(set string) string {
		values := strings.Fields(set[2 : len(set)-2])
		slices.Sort(values)
		return "{[" + strings.Join(values, " ") + "]}"
	})
}

// TestIcebergMaterializesCTEsNamedTwice: a CTE named twice runs once
// (DuckDB would otherwise be free to inline it twice: two scans of one
// reference's stream).
func TestIcebergMaterializesCTEsNamedTwice(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	ctx := context.Background()
	sess, err := openSession(ctx, l.reader.db, l.reader.slots, tenancy.Operator)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	text, _, err := l.reader.plan(ctx, sess, tenancy.Operator, `WITH once AS (SELECT name FROM otel_spans), twice AS (SELECT name FROM otel_spans)
		SELECT * FROM once, twice AS x, twice AS y`, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "twice AS MATERIALIZED") || strings.Contains(text, "once AS MATERIALIZED") {
		t.Fatalf("ran %s", text)
	}
}

// TestIcebergSandbox: the query database reads no file and takes no
// setting even for a query the checker would refuse, and a tenant's view
// filters its rows again.
func TestIcebergSandbox(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	ctx := context.Background()
	sess, err := openSession(ctx, l.reader.db, l.reader.slots, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	for _, q := range []string{
		`SELECT * FROM read_csv('` + filepath.Join(l.dir, "secret.csv") + `')`,
		`SELECT * FROM glob('` + l.dir + `/*')`,
		`ATTACH '` + filepath.Join(l.dir, "catalog.db") + `' AS c`,
		`SET enable_external_access = true`,
		`SET threads = 1`,
		`INSTALL httpfs`,
	} {
		if _, err := sess.conn.ExecContext(ctx, q); err == nil {
			t.Errorf("the sandbox ran %s", q)
		}
	}
	if _, _, err := l.reader.plan(ctx, sess, tenantA, `SELECT name FROM otel_spans`, nil, false); err != nil {
		t.Fatal(err)
	}
	// Each view of a scan (the query's, and the one naming the table for
	// the query's names) filters; the view naming the table reads one.
	rows, err := sess.conn.QueryContext(ctx, `SELECT sql FROM duckdb_views() WHERE temporary AND NOT internal AND sql LIKE '%struct_extract%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var view string
		if err := rows.Scan(&view); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.Contains(view, `WHERE (CAST(struct_extract(r, 'tenant_id') AS VARCHAR) COLLATE "binary" = 'a')`) {
			t.Errorf("tenant a's view: %s", view)
		}
	}
	if err := rows.Err(); err != nil || n == 0 {
		t.Fatalf("the scans' views: %d, %v", n, err)
	}
}

// TestIcebergConcurrentQueries: queries of two tenants at once each read
// their own rows (each query's scans are its own views).
func TestIcebergConcurrentQueries(t *testing.T) {
	l := newIceLake(t, IcebergOptions{MaxConcurrent: 3})
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			s, want := tenantA, []string{"chat|10", "tool|5"}
			if i%2 == 1 {
				s, want = tenantB, []string{"secret-b|99"}
			}
			got, err := l.rows(t, s, `SELECT a.name, a.duration_ms FROM otel_spans a JOIN otel_spans b USING (name) ORDER BY 1`)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("%s read %v, %v; want %v", s, got, err, want)
			}
		})
	}
	wg.Wait()
}

// A stream asked for a batch after it ended is a second scan of one
// reference: the query fails rather than answering from what the first
// left.
func TestScanReaderRefusesASecondScan(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"x": 1}]`))
	if err != nil {
		t.Fatal(err)
	}
	seq := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	r := newScanReader("t", sc, seq, true, memory.DefaultAllocator, nil)
	defer r.Release()
	if !r.Next() || r.RecordBatch().NumRows() != 1 {
		t.Fatal("no first batch")
	}
	if r.Next() || r.Err() != nil {
		t.Fatalf("after the only batch: %v", r.Err())
	}
	if r.Next() || r.Err() == nil {
		t.Fatal("a second scan was answered")
	}
}

// TestIcebergReadsColumnsAddedAfterItsFiles: a query naming only columns
// added to a table after some of its files were written (a raw table's
// event_time, added at start to a table created before it) reads those
// files' rows with the columns null, as a file of the table is read with
// any column it lacks, rather than failing.
func TestIcebergReadsColumnsAddedAfterItsFiles(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	ctx := context.Background()
	tbl, err := l.snk.Catalog().LoadTable(ctx, table.Identifier{"tracelake", "events"})
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	update := txn.UpdateSchema(true, false).
		AddColumn([]string{"event_time"}, iceberggo.PrimitiveTypes.TimestampTz, "", false, nil).
		AddColumn([]string{"ktopic"}, iceberggo.PrimitiveTypes.String, "", false, nil)
	if err := update.Commit(); err != nil {
		t.Fatal(err)
	}
	if tbl, err = txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(
		`[{"record_metadata": "{}", "record_content": "{}", "event_time": "2024-03-01T10:00:00Z", "ktopic": "traces"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	at := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
	defer at.Release()
	if _, err := tbl.AppendTable(ctx, at, 1000, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.reader.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{
		`SELECT ktopic, event_time FROM events ORDER BY ktopic NULLS FIRST`: {"(null)|(null)", "traces|2024-03-01T10:00:00"},
		`SELECT count(*) FROM events WHERE event_time IS NULL`:              {"1"},
		`SELECT count(ktopic), max(event_time) FROM events`:                 {"1|2024-03-01T10:00:00"},
		// Pruned by the predicate, the older file is not read at all.
		`SELECT ktopic FROM events WHERE ktopic = 'traces'`: {"traces"},
	} {
		got, err := l.rows(t, tenancy.Operator, q)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: read %v, %v; want %v", q, got, err, want)
		}
	}
}

// TestIcebergReadsAddedColumnsAfterTheirOlderSchemaIsRemoved: a file
// written before columns were added still holds none of them once the
// schema it was written with is gone from the table's metadata (another
// engine's snapshot expiry with clean_expired_metadata, Iceberg 1.9+,
// removes the schemas no remaining snapshot names, while the current
// snapshot still holds the file). A query naming only those columns
// reads its rows with them null, as before, rather than failing on it:
// which files hold none of them is told by the files' own column
// metrics, not only by the schemas the metadata still lists.
func TestIcebergReadsAddedColumnsAfterTheirOlderSchemaIsRemoved(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	ctx := context.Background()
	id := table.Identifier{"tracelake", "events"}
	tbl, err := l.snk.Catalog().LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	old := tbl.Schema().ID
	txn := tbl.NewTransaction()
	update := txn.UpdateSchema(true, false).
		AddColumn([]string{"event_time"}, iceberggo.PrimitiveTypes.TimestampTz, "", false, nil).
		AddColumn([]string{"ktopic"}, iceberggo.PrimitiveTypes.String, "", false, nil)
	if err := update.Commit(); err != nil {
		t.Fatal(err)
	}
	if tbl, err = txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, as, strings.NewReader(
		`[{"record_metadata": "{}", "record_content": "{}", "event_time": "2024-03-01T10:00:00Z", "ktopic": "traces"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	at := array.NewTableFromRecords(as, []arrow.RecordBatch{rec})
	defer at.Release()
	if _, err := tbl.AppendTable(ctx, at, 1000, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.snk.Catalog().CommitTable(ctx, id, nil, []table.Update{table.NewRemoveSchemasUpdate([]int{old})}); err != nil {
		t.Fatal(err)
	}
	if err := l.reader.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{
		`SELECT ktopic, event_time FROM events ORDER BY ktopic NULLS FIRST`: {"(null)|(null)", "traces|2024-03-01T10:00:00"},
		`SELECT count(ktopic), max(event_time) FROM events`:                 {"1|2024-03-01T10:00:00"},
		`SELECT count(*) FROM events WHERE ktopic IS NULL`:                  {"1"},
	} {
		got, err := l.rows(t, tenancy.Operator, q)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: read %v, %v; want %v", q, got, err, want)
		}
	}
}

// TestIcebergFindsLongStringsInFilesOfManyRowGroups: a string longer than
// Parquet's statistics keep is found by a predicate on its column.
// arrow-go v18.8.0 drops a column chunk's max (or min) longer than 4096
// bytes (parquet/file/column_writer.go, ApplyStatSizeLimits with
// DefaultMaxStatsSize) and then reads a chunk with only its min as having
// both, the max empty (parquet/metadata/statistics_types.gen.go: hasMinMax
// = IsSetMax() || IsSetMin()). iceberg-go v0.7.0 then (a) makes a file's
// bounds of the chunks that kept theirs alone, skipping the others
// (table/internal/parquet_files.go: "!stats.HasMinMax() { continue }"),
// so the manifest's upper bound lies below the file's long values and
// PlanFiles pruned the file, and (b) pruned, as it read, a row group whose
// max was dropped as one whose max is "" (table/evaluators.go,
// TestRowGroup). A predicate on the column (=, IN, >, >=) lost rows: a
// span whose name or status message is a long exception, a log line. Only
// the columns of boundedStrings have their predicates pushed now.
func TestIcebergFindsLongStringsInFilesOfManyRowGroups(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	// 30 spans of one partition in one file, 3 row groups of 10. The
	// names of the first hold a long one (its max dropped), the second's
	// are all long (neither kept), the third's short.
	l.withSpansProperties(t, iceberggo.Properties{table.ParquetRowGroupLimitKey: "10"})
	long := func(c string) string { return strings.Repeat(c, 5000) }
	var spans []span
	for i := range 30 {
		name := fmt.Sprintf("m%02d", i)
		switch {
		case i == 5:
			name = long("y")
		case i >= 10 && i < 20:
			name = long("z") + fmt.Sprint(i)
		}
		spans = append(spans, span{"c", "t", name, int64(i), day(7)})
	}
	l.load(t, spans, nil)
	l.takeScans()
	for _, c := range []struct {
		q    string
		want string
	}{
		{`SELECT count(*) FROM otel_spans WHERE tenant_id = 'c'`, "30"},
		{`SELECT count(*) FROM otel_spans WHERE name = '` + long("y") + `'`, "1"},
		{`SELECT count(*) FROM otel_spans WHERE name > 'x'`, "11"},
		{`SELECT count(*) FROM otel_spans WHERE name IN ('` + long("z") + `12', 'm25')`, "2"},
		{`SELECT count(*) FROM otel_spans WHERE name >= 'm05' AND tenant_id = 'c'`, "25"},
	} {
		got, err := l.rows(t, tenancy.Operator, c.q)
		if err != nil || !slices.Equal(got, []string{c.want}) {
			q := c.q
			if len(q) > 120 {
				q = q[:120] + "…"
			}
			t.Errorf("%s: read %v, %v; want %s (scans %+v)", q, got, err, c.want, l.takeScans())
		}
		l.takeScans()
	}
}

// withSpansProperties sets properties of otel_spans and opens the lake's
// sink again, so that its loads write with them.
func (l *iceLake) withSpansProperties(t *testing.T, props iceberggo.Properties) {
	t.Helper()
	ctx := context.Background()
	tbl, err := l.snk.Catalog().LoadTable(ctx, table.Identifier{"tracelake", "otel_spans"})
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(props); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l.snk = openLakeSink(t, l.dir)
}

// TestIcebergForgetsADroppedTable: a table dropped from the catalog is no
// longer served once the reader has refreshed, as a reader opened after
// the drop does not serve it: the rows it had are not answered on from
// the last snapshot loaded (forever, and by this replica alone), and a
// query naming it is refused as naming an unknown table rather than
// failing on the files a purge deleted. Created again, it is served again.
func TestIcebergForgetsADroppedTable(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	ctx := context.Background()
	id := table.Identifier{"tracelake", "events"}
	if err := l.snk.Catalog().DropTable(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := l.reader.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := l.open(t, IcebergOptions{})
	for name, r := range map[string]*Iceberg{"the reader opened before the drop": l.reader, "a reader opened after it": fresh} {
		if got, err := readRows(r, tenancy.Operator, `SELECT count(*) FROM events`); err == nil {
			t.Errorf("%s read the dropped table: %v", name, got)
		}
		tables, err := r.Tables(ctx, tenancy.Operator)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if tb.Name == "events" {
				t.Errorf("%s lists the dropped table", name)
			}
		}
	}
	l.create(t, "events", iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "record_metadata", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "record_content", Type: iceberggo.PrimitiveTypes.String},
	), `[{"record_metadata": "{}", "record_content": "again"}, {"record_metadata": "{}", "record_content": "again"}]`)
	if err := l.reader.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := l.rows(t, tenancy.Operator, `SELECT count(*) FROM events`); err != nil || !slices.Equal(got, []string{"2"}) {
		t.Errorf("the table created again: read %v, %v; want 2 rows", got, err)
	}
}
