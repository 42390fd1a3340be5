package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/verify"
)

// cmdVerify is `tracelake verify`; on the DuckDB sink it also runs inside
// `tracelake run` (env).
func cmdVerify(ctx context.Context, env *cmdEnv, args []string) error {
	fs := env.flagSet("verify")
	var cf configFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := env.config(&cf, true)
	if err != nil {
		return err
	}
	rep, err := verifyTables(ctx, env, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(env.stdout)
	}
	if !rep.OK {
		return failedCheck{}
	}
	return nil
}

// verifyTables verifies the tables of cfg and, in a load-mode run taking
// several signals (otlp.signals), those of every other signal
// (verify.Report.Signals): each signal's rows load into tables of their
// own, with their own ledger.
func verifyTables(ctx context.Context, env *cmdEnv, cfg *config.Config) (*verify.Report, error) {
	switch cfg.Sink.Type {
	case config.SinkIceberg:
		return verifyEachSignal(ctx, cfg, func(c *config.Config) (*verify.Report, error) { return verifyIceberg(ctx, c) })
	case config.SinkDatabend:
		return verifyEachSignal(ctx, cfg, func(c *config.Config) (*verify.Report, error) { return verifyDatabend(ctx, c) })
	}
	snk, release, err := env.duckDB(ctx, cfg, duckDBUse{existing: true})
	if err != nil {
		return nil, err
	}
	defer release()
	return verifyEachSignal(ctx, cfg, func(c *config.Config) (*verify.Report, error) {
		if c == cfg {
			return verifyDuckDBTables(ctx, c, snk)
		}
		other, release, err := env.duckDBBeside(snk, c)
		if err != nil {
			return nil, err
		}
		defer release()
		return verifyDuckDBTables(ctx, c, other)
	})
}

// verifyEachSignal is check's report of cfg's tables, with the report of
// each other signal's tables a load-mode run of cfg takes added.
func verifyEachSignal(ctx context.Context, cfg *config.Config, check func(*config.Config) (*verify.Report, error)) (*verify.Report, error) {
	var rep *verify.Report
	for _, c := range cfg.SignalConfigs() {
		if c != cfg {
			c = receivedOnly(c)
		}
		// The group's offsets are read before check reads the ledger: a
		// load commits its ledger rows, then its offset, so an offset read
		// first is a start committed before anything of its partition was
		// read, or the ledger read after it holds the load that committed
		// it. Read after, a partition's first load landing in between
		// showed nothing loaded and an offset past the log start, taken
		// for records never to load (AddStarts). A config consuming no
		// topic has no partition to ask about.
		var starts map[sink.TopicPartition]int64
		if c.Consumes() {
			starts = committedStarts(ctx, c)
		}
		r, err := check(c)
		if err != nil {
			if c != cfg {
				err = fmt.Errorf("the %s table %s: %w", c.Kafka.Signal, c.Sink.Table, err)
			}
			return nil, err
		}
		r.CheckLogEnds(func() map[sink.TopicPartition]kafka.Watermarks { return watermarks(ctx, c) })
		r.AddStarts(func() map[sink.TopicPartition]int64 { return starts })
		if rep == nil {
			rep = r
		} else {
			rep.AddSignal(c.Kafka.Signal, c.Sink.Table, r)
		}
	}
	return rep, nil
}

// receivedOnly is c, another signal's configuration of a load-mode run,
// without the Kafka topics: the topics consumed beside the receivers load
// into kafka.signal's table alone, so the other tables' reports must not
// take their partitions (and the group's committed offsets, its lag) for
// their own.
func receivedOnly(c *config.Config) *config.Config {
	o := *c
	o.Kafka.Topics, o.Kafka.TopicRegex = nil, ""
	return &o
}

// verifyDatabend verifies the Databend tables of cfg.
func verifyDatabend(ctx context.Context, cfg *config.Config) (*verify.Report, error) {
	snk, err := openDatabend(cfg)
	if err != nil {
		return nil, err
	}
	defer snk.Close()
	main, dlq, ledger := snk.Tables()
	// Before the tables are read: no statement reads them in one snapshot
	// with another, so the spans' check against their operations covers
	// the loads committed by now (see databend.Sink.LastLoaded).
	last, err := snk.LastLoaded(ctx)
	if err != nil {
		return nil, err
	}
	below := make(map[sink.TopicPartition]int64, len(last))
	for tp, o := range last {
		below[tp] = o + 1
	}
	rep, err := runVerify(ctx, cfg, snk, verify.Tables{Main: main, DLQ: dlq, Ledger: ledger, Topic: databend.TopicExpr})
	if err != nil {
		return nil, err
	}
	if cfg.DecodesOTLP() {
		d := otelDedupOf(cfg)
		c, err := merge.NewDatabendMerger(snk, false).DedupCounts(ctx, d)
		if err != nil {
			return nil, err
		}
		rep.Copies = copiesOf(d, c)
	}
	if cfg.GenAIOperations() {
		src := verify.Sources{Derives: verify.OperationSpansSQL(spanAttributes, spanName), DLQ: dlq, Below: below, Quote: sqltext.DatabendString}
		if err := rep.CheckDerived(ctx, snk, cfg.GenAI.Table, sqltext.Name(cfg.GenAI.Table), main, genai.SpanIdentity, src); err != nil {
			return nil, err
		}
	}
	return rep, checkTopicIDs(ctx, cfg, snk, rep)
}

// verifyDuckDBTables verifies the DuckDB tables of cfg in snk, with its
// models' progress.
func verifyDuckDBTables(ctx context.Context, cfg *config.Config, snk *duckdb.Sink) (*verify.Report, error) {
	// One snapshot for every count the verdict compares: through a
	// running process loads commit between the queries, and the ledger
	// read before a load and the rows counted after it would disagree
	// (each load is whole, so no snapshot does).
	tx, err := snk.DB().BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	snapshot := verify.SQLQuerier{DB: tx}
	rep, err := verifyDuckDB(ctx, cfg, snk, snapshot)
	if err != nil {
		return nil, err
	}
	// The copies and the models' progress in the same snapshot: read on
	// the database, after it, they counted the loads and merges committed
	// since (more rows pending than the table holds in the report).
	if cfg.DecodesOTLP() {
		d := otelDedupOf(cfg)
		c, err := merge.CountsIn(ctx, tx, d)
		if err != nil {
			return nil, err
		}
		rep.Copies = copiesOf(d, c)
		if cfg.GenAIOperations() {
			t := snk.Tables()
			src := verify.Sources{Derives: verify.OperationSpansDuckDB(spanAttributes, spanName), DLQ: t.DLQ} // one snapshot: no bound
			if err := rep.CheckDerived(ctx, snapshot, cfg.GenAI.Table, sqltext.Name(cfg.GenAI.Table), t.Main, genai.SpanIdentity, src); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range cfg.Models() {
		n, err := merge.PendingIn(ctx, tx, m)
		if err != nil {
			return nil, err
		}
		rep.Models = append(rep.Models, verify.ModelProgress{Model: m.Name, Pending: n})
	}
	return rep, checkTopicIDs(ctx, cfg, snk, rep)
}

// copies counts the copies an OpenTelemetry table holds and what its
// dedup model kept, for verify's report.
func copies(ctx context.Context, mg *merge.Merger, d merge.Dedup) (*verify.Copies, error) {
	c, err := mg.Counts(ctx, d)
	if err != nil {
		return nil, err
	}
	return copiesOf(d, c), nil
}

// copiesOf is verify's report of a dedup model's counts.
func copiesOf(d merge.Dedup, c merge.DedupCounts) *verify.Copies {
	return &verify.Copies{Table: d.Name, Rows: c.Rows, Identities: c.Identities, Target: d.Target(), Kept: c.Kept, Pending: c.Pending}
}

// verifyIceberg verifies the Iceberg tables: positions against Kafka, and
// every stored offset counted by scanning both tables.
func verifyIceberg(ctx context.Context, cfg *config.Config) (*verify.Report, error) {
	ice, err := openIceberg(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer ice.Close()
	// An abandonment records its positions (the main table's position
	// moved past them) before it deletes the rows the other tables hold
	// there, marking them until it has: read while it is between the two,
	// those rows would be taken for requests stored twice (and an
	// operation there for one without its span).
	pending, deadDerived, err := awaitMarked(ctx, ice)
	if err != nil {
		return nil, err
	}
	next, err := ice.AllPositions(ctx)
	if err != nil {
		return nil, err
	}
	// Read with the positions, before the scans, once no abandonment is
	// deleting: a row the scans find at a position read as abandoned is
	// one stored twice, not one of the failed load not yet deleted (but
	// for an abandonment begun between this read and the scans).
	abandoned, err := ice.Abandoned(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := ice.Stored(ctx, false)
	if err != nil {
		return nil, err
	}
	dlq, err := ice.Stored(ctx, true)
	if err != nil {
		return nil, err
	}
	// No ledger ranges cover a transaction's markers here, nor OTLP
	// messages that make no row: Kafka says which missing offsets held a
	// committed record with something to store.
	stores, err := storesRows(cfg)
	if err != nil {
		return nil, err
	}
	records := func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		// The receivers' own sequences (otlp.mode load) are not in Kafka:
		// each of their positions held a request, so a hole there is a gap.
		inKafka := maps.Clone(spans)
		maps.DeleteFunc(inKafka, func(tp sink.TopicPartition, _ sink.Run) bool { return directload.IsTopic(tp.Topic) })
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		return kafka.DataRecords(rctx, cfg.Kafka, inKafka, stores)
	}
	rep := verify.FromStored(watermarks(ctx, cfg), next, raw, dlq, abandoned, cfg.Kafka.StartOffset == "earliest", records)
	for _, tp := range slices.SortedFunc(maps.Keys(pending), func(a, b sink.TopicPartition) int {
		return strings.Compare(a.String(), b.String())
	}) {
		rep.OK = false
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: positions %s abandoned, and the rows the other tables hold there not yet deleted after %s: "+
			"a process stopped in the middle of abandoning them (the next start on its otlp.instance deletes them)",
			tp, formatRuns(pending[tp]), mainCommitWait))
	}
	for _, tp := range slices.SortedFunc(maps.Keys(deadDerived), func(a, b sink.TopicPartition) int {
		return strings.Compare(a.String(), b.String())
	}) {
		rep.OK = false
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: the operations at the dead letters %s not yet deleted after %s: "+
			"a process stopped after the spans' commit that marked them (the partition's next load or assignment deletes them)",
			tp, formatRuns(deadDerived[tp]), mainCommitWait))
	}
	rawID, dlqID := ice.Identifiers()
	if err := awaitMainPast(ctx, ice, strings.Join(dlqID, "."), strings.Join(rawID, "."), storedAhead(dlq, next), rep); err != nil {
		return nil, err
	}
	if cfg.DecodesOTLP() {
		d := otelDedupOf(cfg)
		c, err := ice.DedupCounts(ctx, d.Identity())
		if err != nil {
			return nil, err
		}
		rep.Copies = copiesOf(d, merge.DedupCounts(c))
	}
	if cfg.GenAIOperations() {
		if err := checkIcebergDerived(ctx, cfg, ice, rep); err != nil {
			return nil, err
		}
	}
	return rep, checkTopicIDs(ctx, cfg, ice, rep)
}

// checkIcebergDerived checks the derived table against the main table by
// their rows' coordinates and the spans' ids, scanned into an in-memory
// DuckDB, and the GenAI spans against their operations.
func checkIcebergDerived(ctx context.Context, cfg *config.Config, ice *iceberg.Sink, rep *verify.Report) error {
	db, err := memoryDuckDB()
	if err != nil {
		return err
	}
	defer db.Close()
	coords := duckdb.TypedColumns(&schema.Table{})
	for _, id := range genai.SpanIdentity {
		coords = append(coords, duckdb.Column{Name: id, Type: "VARCHAR"})
	}
	// A load commits its operations before its spans: for the length of
	// a commit, or after a crash between the two until the restart's
	// load, operations are stored whose spans are not yet, past the
	// spans' positions (and a load committing while the spans are copied
	// puts its operations in the copy made after). Only the operations
	// below the positions read before the spans are copied are checked:
	// their spans are in the copy. So are only the spans below them: the
	// operations of a span committed after the positions were read may
	// have committed after the operations were copied.
	pos, err := ice.AllPositions(ctx)
	if err != nil {
		return err
	}
	raw, _ := ice.Identifiers()
	if err := copyIcebergSpans(ctx, ice, raw, db, "main", coords); err != nil {
		return err
	}
	if _, err := copyIcebergTable(ctx, ice, ice.DerivedIdentifier(), db, "derived", coords); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE positions (topic VARCHAR, "partition" INTEGER, next BIGINT)`); err != nil {
		return err
	}
	for tp, n := range pos {
		if _, err := db.ExecContext(ctx, `INSERT INTO positions VALUES (?, ?, ?)`, tp.Topic, tp.Partition, n); err != nil {
			return err
		}
	}
	ahead, err := operationsAhead(ctx, db)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf(`DELETE FROM derived AS d WHERE NOT EXISTS (SELECT 1 FROM positions AS p `+
		`WHERE p.topic = d.%[1]s AND p."partition" = d.%[2]s AND d.%[3]s < p.next)`,
		schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn)); err != nil {
		return fmt.Errorf("leave out the operations past the spans' positions: %w", err)
	}
	if err := awaitMainPast(ctx, ice, cfg.GenAI.Table, strings.Join(raw, "."), ahead, rep); err != nil {
		return err
	}
	// No Iceberg load dead-letters an operation on its own: no DLQ.
	return rep.CheckDerived(ctx, verify.SQLQuerier{DB: db}, cfg.GenAI.Table, "derived", "main", genai.SpanIdentity,
		verify.Sources{Derives: spanDerives, Below: pos})
}

// mainCommitWait is how long verify waits for the main table's positions
// to pass rows another table of a load holds past them (operations, dead
// letters): a load commits those tables first and the main table a
// commit later (longer when that commit loses races: a load makes it
// again, up to 8 times). Past it, the main table's rows are taken for
// missing.
var mainCommitWait = 5 * time.Second

// aheadRun is a partition's rows of a table past the main table's
// positions.
type aheadRun struct {
	tp          sink.TopicPartition
	first, last int64
	rows        int64
}

// operationsAhead lists, per partition, the operations of db's derived
// table past the spans' positions (db's positions table).
func operationsAhead(ctx context.Context, db *sql.DB) ([]aheadRun, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT d.%[1]s, d.%[2]s, min(d.%[3]s), max(d.%[3]s), count(*) FROM derived AS d `+
		`WHERE NOT EXISTS (SELECT 1 FROM positions AS p WHERE p.topic = d.%[1]s AND p."partition" = d.%[2]s AND d.%[3]s < p.next) `+
		`GROUP BY ALL ORDER BY ALL`, schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn))
	if err != nil {
		return nil, fmt.Errorf("find the operations past the spans' positions: %w", err)
	}
	defer rows.Close()
	var out []aheadRun
	for rows.Next() {
		var r aheadRun
		if err := rows.Scan(&r.tp.Topic, &r.tp.Partition, &r.first, &r.last, &r.rows); err != nil {
			return nil, fmt.Errorf("find the operations past the spans' positions: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// storedAhead lists, per partition, the offsets of stored (a table's,
// as Sink.Stored reads it) at or past next (the main table's positions;
// none: 0).
func storedAhead(stored map[sink.TopicPartition]*sink.Offsets, next map[sink.TopicPartition]int64) []aheadRun {
	var out []aheadRun
	for tp, offs := range stored {
		union, _ := sink.Coverage(offs)
		r := aheadRun{tp: tp, first: -1}
		for _, u := range union {
			if u.Last < next[tp] {
				continue
			}
			first := max(u.First, next[tp])
			if r.first < 0 {
				r.first = first
			}
			r.last = u.Last
			r.rows += u.Last - first + 1
		}
		if r.rows > 0 {
			out = append(out, r)
		}
	}
	return out
}

// awaitMarked waits up to mainCommitWait for the work the main table
// marks as under way to finish — abandonments of OTLP positions deleting
// the rows the other tables hold there, and loads deleting the operations
// a killed load left at their dead letters — and returns, per partition,
// the positions still marked of each: a process stopped between the steps
// leaves them until its next start (the operations: until the partition's
// next load or assignment).
func awaitMarked(ctx context.Context, ice *iceberg.Sink) (abandoning, deadDerived map[sink.TopicPartition][]sink.Run, err error) {
	deadline := time.Now().Add(mainCommitWait)
	for {
		if abandoning, err = ice.Abandoning(ctx); err != nil {
			return nil, nil, fmt.Errorf("read the abandoned positions still to delete: %w", err)
		}
		if deadDerived, err = ice.DeadDerived(ctx); err != nil {
			return nil, nil, fmt.Errorf("read the dead letters whose operations are still to delete: %w", err)
		}
		if len(abandoning)+len(deadDerived) == 0 || time.Now().After(deadline) {
			return abandoning, deadDerived, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond): // catalog reads per poll
		}
	}
}

// formatRuns renders runs of positions as "first-last, first-last".
func formatRuns(runs []sink.Run) string {
	list := make([]string, len(runs))
	for i, r := range runs {
		list[i] = fmt.Sprintf("%d-%d", r.First, r.Last)
	}
	return strings.Join(list, ", ")
}

// awaitMainPast waits up to mainCommitWait for the main table's positions
// to pass the rows ahead of them that table holds on the OTLP receivers'
// own sequences (their load committing its main table), and reports,
// failing rep, those they still do not pass: a load-mode load that
// committed them and not its main table's rows, on an instance that took
// no request since (it abandons them only at its next request or start).
// Taken for a load still committing, they were never reported: an idle
// instance keeps them, without the main table's rows, for good. Not on a
// Kafka partition: its load's retry, or the partition's next owner,
// reads those records again from the main table's positions and commits
// the rest (the rows ahead fenced by their table's own positions), so
// rows there are a load still committing however long its main commit
// takes (lost races, backoff), not a fault to fail verify for.
func awaitMainPast(ctx context.Context, ice *iceberg.Sink, table, main string, ahead []aheadRun, rep *verify.Report) error {
	ahead = slices.DeleteFunc(ahead, func(r aheadRun) bool { return !directload.IsTopic(r.tp.Topic) })
	deadline := time.Now().Add(mainCommitWait)
	for len(ahead) > 0 {
		pos, err := ice.AllPositions(ctx)
		if err != nil {
			return err
		}
		ahead = slices.DeleteFunc(ahead, func(r aheadRun) bool { return pos[r.tp] > r.last })
		if len(ahead) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // a catalog read per poll
		}
	}
	for _, r := range ahead {
		rep.OK = false
		rep.Problems = append(rep.Problems, fmt.Sprintf("%[1]s: %[2]d rows at %[3]s offsets %[4]d-%[5]d past the positions of %[6]s, and no commit of %[6]s passed them within %[7]s: "+
			"a load committed them and not its rows of %[6]s (an OTLP load-mode instance abandons them at its next request or start)",
			table, r.rows, r.tp, r.first, r.last, main, mainCommitWait))
	}
	return nil
}

// The spans table's columns the GenAI mapper reads to tell an operation
// (genai.Convention), and the column copyIcebergSpans tells it in.
const (
	spanAttributes = "span_attributes"
	spanName       = "name"
	spanDerives    = "derives"
)

// copyIcebergSpans creates table name in db with columns cols (the
// coordinates and ids) of the Iceberg spans table id's rows, and
// spanDerives: whether the GenAI mapper makes an operation of the span
// (otel.MakesOperation), told as the rows are scanned so that their
// attributes, most of the table, are never held.
func copyIcebergSpans(ctx context.Context, ice *iceberg.Sink, id table.Identifier, db *sql.DB, name string, cols []duckdb.Column) error {
	tbl, err := ice.Catalog().LoadTable(ctx, id)
	if err != nil {
		return fmt.Errorf("load iceberg table %v: %w", id, err)
	}
	defs, names := make([]string, 0, len(cols)+1), make([]string, 0, len(cols)+2)
	for _, c := range cols {
		defs, names = append(defs, sqltext.Name(c.Name)+" "+c.Type), append(names, c.Name)
	}
	defs = append(defs, sqltext.Name(spanDerives)+" BOOLEAN")
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", sqltext.Name(name), strings.Join(defs, ", "))); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	fields := make([]arrow.Field, 0, len(cols)+1)
	convert := func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		sc := rec.Schema()
		out := make([]arrow.Array, 0, len(cols)+1)
		fields = fields[:0]
		for _, c := range cols { // in cols' order, the table's: the scan's is the schema's
			i := sc.FieldIndices(c.Name)
			if len(i) == 0 {
				return nil, fmt.Errorf("%v: no column %s", id, c.Name)
			}
			out, fields = append(out, rec.Column(i[0])), append(fields, sc.Field(i[0]))
		}
		spanNames, ok1 := column[*array.String](rec, spanName)
		attrs, ok2 := column[*array.String](rec, spanAttributes)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%v: %s and %s are not strings", id, spanName, spanAttributes)
		}
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		defer b.Release()
		for i := range int(rec.NumRows()) {
			derives, err := otel.MakesOperation(spanNames.Value(i), []byte(attrs.Value(i)))
			if err != nil {
				return nil, fmt.Errorf("%v: the attributes of a span: %w", id, err)
			}
			b.Append(derives)
		}
		flags := b.NewArray()
		defer flags.Release()
		out, fields = append(out, flags), append(fields, arrow.Field{Name: spanDerives, Type: arrow.FixedWidthTypes.Boolean})
		return array.NewRecordBatch(arrow.NewSchema(fields, nil), out, rec.NumRows()), nil
	}
	if _, err := appendIcebergTable(ctx, tbl, append(names, spanName, spanAttributes), db, name, convert); err != nil {
		return err
	}
	return nil
}

// column is rec's column name as an A, false if it has none of that type.
func column[A arrow.Array](rec arrow.RecordBatch, name string) (A, bool) {
	var zero A
	i := rec.Schema().FieldIndices(name)
	if len(i) == 0 {
		return zero, false
	}
	a, ok := rec.Column(i[0]).(A)
	return a, ok
}

// verifyDuckDB verifies the DuckDB sink snk, its tables read by q.
func verifyDuckDB(ctx context.Context, cfg *config.Config, snk *duckdb.Sink, q verify.SQLQuerier) (*verify.Report, error) {
	t := snk.Tables()
	if err := ledgerThere(ctx, q, cfg); err != nil {
		return nil, err
	}
	main := t.Main
	if cfg.CapturesChanges() {
		// The rows of a record are in the changelog tables it was routed
		// to: counted together, they must match the ledger.
		var err error
		if main, err = snk.RoutedRows(ctx, q.DB); err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
	}
	return runVerify(ctx, cfg, q, verify.Tables{Main: main, DLQ: t.DLQ, Ledger: t.Ledger, Topic: duckdb.TopicExpr})
}

// ledgerThere refuses a database without cfg's ledger table: nothing was
// ever loaded into it under this sink.table (a mistaken path or table
// name), which DuckDB's catalog error for the ledger did not say. The
// table is looked up as the sink names it (schema.table, or table in
// main), not by a name compared in every schema.
func ledgerThere(ctx context.Context, q verify.SQLQuerier, cfg *config.Config) error {
	ledger := cfg.LedgerTable()
	cols, err := duckdb.TableColumns(ctx, q.DB, ledger)
	if err != nil {
		return fmt.Errorf("verify: look for the ledger %s: %w", ledger, err)
	}
	if len(cols) == 0 {
		return fmt.Errorf("verify: nothing was loaded into %s under sink.table %s (it has no table %s): check sink.duckdb.path and sink.table", cfg.Sink.DuckDB.Path, cfg.Sink.Table, ledger)
	}
	return nil
}

// watermarks asks Kafka for the partitions' watermarks; nil (and a
// warning) if it cannot answer, and the check goes on without them.
func watermarks(ctx context.Context, cfg *config.Config) map[sink.TopicPartition]kafka.Watermarks {
	return askKafka(ctx, cfg, "Kafka watermarks unavailable; checking the sink's tables only",
		func(ctx context.Context, admin *kafka.Admin) (map[sink.TopicPartition]kafka.Watermarks, error) {
			return admin.ConsumedWatermarks(ctx, cfg.Kafka)
		})
}

// checkTopicIDs fails rep for each partition whose ledger recorded
// another topic id than Kafka has for the topic now
// (verify.Report.CheckTopicIDs); Kafka asked only when the ledger
// recorded ids.
func checkTopicIDs(ctx context.Context, cfg *config.Config, keeper sink.TopicIDKeeper, rep *verify.Report) error {
	parts := rep.LoadedKafkaPartitions()
	if len(parts) == 0 {
		return nil
	}
	recorded, err := keeper.TopicIDs(ctx, parts)
	if err != nil {
		return err
	}
	var topics []string
	for tp := range recorded {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	rep.CheckTopicIDs(recorded, func() map[string]string {
		return askKafka(ctx, cfg, "Kafka's topic ids unavailable; the ledger's are not checked",
			func(ctx context.Context, admin *kafka.Admin) (map[string]string, error) {
				return admin.TopicIDs(ctx, topics)
			})
	})
	return nil
}

// committedStarts asks Kafka for the group's committed offsets; nil (and
// a warning) if it cannot answer.
func committedStarts(ctx context.Context, cfg *config.Config) map[sink.TopicPartition]int64 {
	return askKafka(ctx, cfg, "Kafka's committed offsets unavailable; the lag of a partition with nothing loaded stays unknown",
		func(ctx context.Context, admin *kafka.Admin) (map[sink.TopicPartition]int64, error) {
			return admin.Committed(ctx, cfg.Kafka.Group)
		})
}

// askKafka runs ask with an admin client of cfg's Kafka, for at most 15 s;
// the zero value, logging warning with the error, if Kafka cannot answer.
// No client (no brokers configured) is no answer, without a warning.
func askKafka[T any](ctx context.Context, cfg *config.Config, warning string, ask func(context.Context, *kafka.Admin) (T, error)) T {
	var none T
	admin, err := kafka.NewAdmin(cfg.Kafka)
	if err != nil {
		return none
	}
	defer admin.Close()
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	got, err := ask(qctx, admin)
	if err != nil {
		cmdLog(ctx).Warn(warning, "err", err)
	}
	return got
}

// runVerify checks the ledger and tables of a SQL sink.
func runVerify(ctx context.Context, cfg *config.Config, db verify.Querier, t verify.Tables) (*verify.Report, error) {
	t.Raw = cfg.Mode == config.ModeRaw
	if cfg.DecodesOTLP() || cfg.CapturesChanges() {
		t.Topic, t.Index = schema.TopicColumn, schema.IndexColumn
	}
	rep, err := verify.Run(ctx, db, t, watermarks(ctx, cfg), cfg.Kafka.StartOffset == "earliest")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return rep, nil
}

// storesRows says whether a Kafka record stores a row (or a dead letter):
// every record does, but an OTLP message with no spans, log records or
// points, or one of another signal on a shared topic, stores none, so the
// offset it leaves out of the tables is not a gap. nil: every record.
func storesRows(cfg *config.Config) (func(*kgo.Record) bool, error) {
	if !cfg.DecodesOTLP() || !cfg.Consumes() { // without topics nothing is asked of Kafka
		return nil, nil
	}
	dec, err := pipeline.OTLPDecoder(cfg, cfg.Kafka.Format, cfg.Tenancy.KafkaHeader, nil)
	if err != nil {
		return nil, err
	}
	return func(r *kgo.Record) bool {
		n, err := dec.AppendRows(&sink.Batch{}, r)
		return n > 0 || err != nil // an undecodable message is a dead letter
	}, nil
}
