// Package databend is the Databend sink: each batch is uploaded to a stage
// as an NDJSON file (zstd by default) under a name built from its offsets,
// and one load runs, in one Databend transaction, a multi-file COPY INTO
// for the raw rows, one for the dead-letter rows and the INSERT of their
// ledger rows. The ledger read at the start of that transaction decides
// what is already loaded, so a load repeated after a lost reply, a restart
// or a move of the partition never loads a row twice.
package databend

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Options configure a Sink.
type Options struct {
	DSN   string
	Table string // raw table, or the user's table in transform mode; <table>_dlq, <table>_ledger and <table>_fence beside it
	// Transform loads each JSON object as a row of the user's existing
	// Table, fields matched to columns by name.
	Transform bool
	// Typed, when set, is the declared table whose rows (NDJSON) the
	// batches carry (OTLP spans, logs, points): Table is created with its
	// columns and COPY maps each row onto them by name.
	Typed *schema.Table
	// Derived, with a Typed table, is the table of the batches' Derived
	// rows (genai_operations), named DerivedTable: created with its
	// columns and copied in the transaction of the rows it comes from,
	// fenced by the same coordinates; a row Databend rejects is
	// dead-lettered as the row, like a typed row.
	Derived      *schema.Table
	DerivedTable string
	// DedupTables, with a Typed table, are the dedup model's target and
	// its scratch increment (merge.Dedup): created beside Table with its
	// columns and a dedup_key. The merge fills them, never a load.
	DedupTables []string
	// Setup are idempotent statements Prepare runs before the tables: the
	// dedup model's own (its watermark), so that the model is whole from
	// the first run and verify can count it before its first merge. They
	// need none of the sink's tables.
	Setup []string
	// DedupReset are statements Prepare runs after Setup, before it
	// creates the dedup model's target (the first of DedupTables), when
	// it finds the target absent — dropped to be built again, or never
	// made: the model's watermarks forgotten
	// (merge.DatabendStatements.Reset). Kept, they describe the target
	// dropped, and the new one would get only the rows loaded since. Run
	// before the CREATE, a start stopped between the two resets again.
	DedupReset []string
	Stage      string // ~ (user stage) or a stage name
	Prefix     string // path in the stage, ending in /
	// Purge removes loaded files from the stage once their load committed.
	Purge bool
	// DisableVariantCheck is COPY's DISABLE_VARIANT_CHECK.
	DisableVariantCheck bool
	// StreamingLoad (the reference's useStreamingLoad) sends files through
	// the query node (/v1/upload_to_stage) rather than to object storage
	// by presigned URLs: nothing but the query endpoint needs to be
	// reachable. Databend's /v1/streaming_load itself is not used: it
	// cannot take part in a transaction (the server takes the session's
	// transaction and never hands it back, servers/http/v1/streaming_load.rs,
	// so the next statement fails with TransactionTimeout 4003), and the
	// rows must commit with their ledger rows.
	StreamingLoad bool
	Zstd          bool
	Uploads       int           // concurrent uploads per process
	Timeout       time.Duration // per HTTP request
	Log           *slog.Logger
}

// Sink loads into Databend. Every method may be called by several workers
// at once: each load has its own session (and transaction).
type Sink struct {
	opt     Options
	c       *client
	log     *slog.Logger
	tables  tables
	uploads chan struct{}
	zstd    sink.Zstd

	// kept holds what each staged file holds, from its upload until its
	// load commits or it is discarded: a load that must leave rows out (a
	// row Databend rejects, rows a former owner loaded) stages the rest
	// from it. The memory is within max_inflight_bytes, which counts these
	// records until they are loaded.
	mu   sync.Mutex
	kept map[string]*keptFile
	// disagree counts, per staged name, the loads whose ledger read
	// lacked a file COPY's load history has (see copyFiles).
	disagree map[string]int
	// unsettled holds, by load identity, each load whose last attempt
	// failed (see unsettle): its files and the claim markers copied by
	// its attempts whose COMMIT went unanswered, until a later attempt
	// commits, the ledger shows one landed (LoadedAs) or it is discarded.
	unsettled map[string]*unsettledLoad
	// prunable is the latest claims read of each partition since the
	// last prune of the fence table, sincePrune the loads committed
	// since (pruneClaims).
	prunable   map[sink.TopicPartition]claimsRead
	sincePrune int
	// userColumns are the user's table's columns in transform mode, read
	// by Prepare, for the checks before staging (checkTransformRows).
	userColumns []userColumn
}

// keptFile is a staged file's NDJSON and, in transform mode (where the
// lines are the bare objects), each line's coordinates. The lines are
// split only when a load needs them (rows to leave out): staging, the hot
// path, keeps the batch's bytes as they are.
type keptFile struct {
	data   []byte
	coords []coord
	bytes  int64 // as uploaded

	split sync.Once
	lines [][]byte
	// sent are transform-mode objects as their messages held them, where
	// some were staged rewritten (checkTransformRows); nil: the lines.
	sent [][]byte
}

// sentLine is line i as its message held it, for its dead letter.
func (k *keptFile) sentLine(i int) []byte {
	if k.sent != nil {
		return k.sent[i]
	}
	return k.Lines()[i]
}

// Lines returns the file's lines, splitting them on first use.
func (k *keptFile) Lines() [][]byte {
	k.split.Do(func() {
		if k.lines == nil {
			k.lines = sink.Lines(k.data)
		}
	})
	return k.lines
}

// coord is where a transform-mode line came from.
type coord struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"` // base64
	// The record's headers and timestamp (envelope.AppendTransformRow),
	// for the dead letter of an object the table rejects.
	Headers    json.RawMessage `json:"headers"`
	CreateTime *string         `json:"create_time"`
}

// tables are the quoted names of the sink's tables; fence holds the
// claims of ledger positions (see claim).
type tables struct{ main, dlq, ledger, fence, derived string }

// Open checks the options; it makes no connection (Prepare does).
func Open(opt Options) (*Sink, error) {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Uploads < 1 {
		opt.Uploads = 1
	}
	if opt.Timeout == 0 {
		opt.Timeout = 5 * time.Minute
	}
	if opt.Stage == "" {
		opt.Stage = "~"
	}
	if (opt.Derived != nil) != (opt.Typed != nil && opt.DerivedTable != "") {
		return nil, errors.New("BUG: a derived table needs a typed table and a name")
	}
	c, err := newClient(opt.DSN, opt.Timeout)
	if err != nil {
		return nil, err
	}
	derived := ""
	if opt.Derived != nil {
		derived = sqltext.Name(opt.DerivedTable)
	}
	return &Sink{
		opt:       opt,
		c:         c,
		log:       opt.Log,
		uploads:   make(chan struct{}, opt.Uploads),
		kept:      map[string]*keptFile{},
		disagree:  map[string]int{},
		unsettled: map[string]*unsettledLoad{},
		prunable:  map[sink.TopicPartition]claimsRead{},
		// The first committed load prunes (see pruneEvery).
		sincePrune: pruneEvery - 1,
		tables: tables{
			main:    sqltext.Name(opt.Table),
			dlq:     sqltext.Name(opt.Table + "_dlq"),
			ledger:  sqltext.Name(opt.Table + "_ledger"),
			fence:   sqltext.Name(opt.Table + "_fence"),
			derived: derived,
		},
	}, nil
}

// StageAhead lets each worker upload up to 4 batches at once (the uploads
// of all workers are bounded by Options.Uploads).
func (s *Sink) StageAhead() int { return 4 }

// Close releases nothing: sessions live in the requests.
func (s *Sink) Close() error { return nil }

// Exec runs statements one after the other in one session (merge uses it).
func (s *Sink) Exec(ctx context.Context, statements ...string) error {
	ss := s.c.session()
	for _, q := range statements {
		if _, err := ss.query(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return nil
}

// ExecTx runs statements in one transaction of one session (a model's
// merge): all of them commit or none does. A transaction that fails on a
// transient error or one of retryableCodes (a commit conflict, a lost
// session) is run again from the start, up to 5 times: its statements
// must read what they change, as a merge reads its watermark.
func (s *Sink) ExecTx(ctx context.Context, statements ...string) error {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			s.log.Warn("databend transaction failed; running it again", "attempt", attempt+1, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		if err = s.execTx(ctx, statements); err == nil || !isTransient(err) {
			return err
		}
	}
	return err
}

func (s *Sink) execTx(ctx context.Context, statements []string) error {
	ss, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	committed := false
	defer func() { end(committed) }()
	for _, q := range statements {
		if _, err := ss.query(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	if _, err := ss.query(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
}

// begin starts a transaction in a new session. The caller defers end with
// whether it committed: a transaction that did not is rolled back, since a
// failed statement may leave it open on the server (after a lost COMMIT
// reply the ROLLBACK is a no-op; the ledger or watermark the retry reads
// says what committed).
func (s *Sink) begin(ctx context.Context) (*session, func(committed bool), error) {
	ss := s.c.session()
	if _, err := ss.query(ctx, "BEGIN"); err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return ss, func(committed bool) {
		if committed {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := ss.query(rctx, "ROLLBACK"); err != nil {
			s.log.Debug("rollback after a failed transaction", "err", err)
		}
	}, nil
}

// TopicExpr is the SQL expression of a raw row's topic.
const TopicExpr = "record_metadata:topic::VARCHAR"

// MainTopicExpr is the SQL expression of a main-table row's topic: a raw
// row's, or a declared table's column.
func (s *Sink) MainTopicExpr() string {
	if s.opt.Typed != nil {
		return schema.TopicColumn
	}
	return TopicExpr
}

// Tables returns the quoted names of the main, dead-letter and ledger
// tables.
func (s *Sink) Tables() (main, dlq, ledger string) {
	return s.tables.main, s.tables.dlq, s.tables.ledger
}

// QueryText runs a query in a session of its own and returns its rows as
// text, NULL as "" (verify uses it).
func (s *Sink) QueryText(ctx context.Context, q string) ([][]string, error) {
	rows, err := s.QueryRows(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(rows))
	for i, row := range rows {
		out[i] = make([]string, len(row))
		for j, v := range row {
			if v != nil {
				out[i][j] = *v
			}
		}
	}
	return out, nil
}

// QueryRows runs a query in a session of its own and returns its rows as
// Databend's text of each value, nil for NULL (TIMESTAMP as
// 2006-01-02 15:04:05.000000, VARIANT as JSON, DECIMAL exact).
func (s *Sink) QueryRows(ctx context.Context, q string) ([][]*string, error) {
	res, err := s.c.session().query(ctx, q)
	if err != nil {
		return nil, err
	}
	return res.Rows, nil
}

// Rebuild is a rebuild of the derived table begun by BeginRebuild: the
// ledger's positions before the main table's rows were read.
type Rebuild struct {
	last map[sink.TopicPartition]int64
}

// UpTo is the last offset per partition the rebuild covers: its rows
// must be derived from the main table's rows at or below these offsets
// (of these partitions) and from all of them. The main table's rows past
// them are loads that committed after BeginRebuild; their derived rows
// stay as they loaded.
func (r *Rebuild) UpTo() map[sink.TopicPartition]int64 { return maps.Clone(r.last) }

// BeginRebuild reads the ledger's last loaded offset of every partition,
// before the caller reads the main table's rows to derive the new rows
// from. A load commits its rows, its derived rows and its ledger rows in
// one transaction and never adds a row at or below the ledger's position
// (its fence), so every main and derived row at or below what is read
// here is committed before it, and the rows read after it include them.
// Databend gives no transaction one snapshot of the tables it only reads
// (a read sees the latest commit; only a mutated table keeps a base
// snapshot: TxnBuffer in storages/common/session/src/transaction.rs), so
// the ledger, not a snapshot, is what bounds the rebuild.
func (s *Sink) BeginRebuild(ctx context.Context) (*Rebuild, error) {
	if s.opt.Derived == nil {
		return nil, errors.New("no derived table is configured")
	}
	last, err := s.LastLoaded(ctx)
	if err != nil {
		return nil, err
	}
	return &Rebuild{last: last}, nil
}

// LastLoaded reads the ledger's last loaded offset of every partition. A
// load commits its rows, its derived rows and its ledger rows in one
// transaction and never adds a row at or below the ledger's position (its
// fence): every main and derived row at or below what it reads is
// committed, and a read after it sees them all (what bounds a rebuild,
// and verify's check of the spans against their operations).
func (s *Sink) LastLoaded(ctx context.Context) (map[sink.TopicPartition]int64, error) {
	return s.ledgerPositions(ctx, s.c.session(), "")
}

// ReplaceDerived replaces the rows of the derived table (Options.Derived)
// that r covers (Rebuild.UpTo) with the NDJSON rows of files (each one
// file's content, derived from the main table's rows r covers), in one
// transaction: the files are staged, then DELETE of the rows r covers
// and COPY, then COMMIT. The derived rows of loads that committed after
// BeginRebuild are past r and stay; a load committing during the
// transaction appends its rows after what the DELETE read, and
// databend-query commits the DELETE on top of them
// (storages/fuse/src/retry/commit.rs, try_rebuild_req; retry/diff.rs
// SegmentsDiff keeps segments appended since the base): so a rebuild
// beside a running loader neither loses nor doubles a row. It returns the
// rows copied.
func (s *Sink) ReplaceDerived(ctx context.Context, r *Rebuild, files [][]byte) (int64, error) {
	if s.opt.Derived == nil {
		return 0, errors.New("no derived table is configured")
	}
	var targets []target
	var staged []sink.File
	defer func() {
		if err := s.remove(context.WithoutCancel(ctx), staged); err != nil {
			s.log.Warn("rebuild files stay in the stage: remove failed", "err", err)
		}
	}()
	for i, data := range files {
		name, _, err := s.put(ctx, fmt.Sprintf("rebuild-%s-%d-%d", s.opt.DerivedTable, time.Now().UnixNano(), i), stageableTimes(data, timestampColumns(s.opt.Derived)))
		if err != nil {
			return 0, err
		}
		staged = append(staged, sink.File{RowsPath: name})
		targets = append(targets, target{name, int64(len(sink.Lines(data)))})
	}
	ss, end, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() { end(committed) }()
	if len(r.last) > 0 { // an empty ledger: no row is covered
		if _, err := ss.query(ctx, deleteUpTo(s.tables.derived, r.last)); err != nil {
			return 0, fmt.Errorf("delete the rebuilt rows of %s: %w", s.opt.DerivedTable, err)
		}
	}
	got, err := s.copyFiles(ctx, ss, &loadPlan{}, s.tables.derived, targets)
	if err != nil {
		return 0, err
	}
	var n int64
	for name, o := range got {
		if o.errors > 0 {
			return 0, fmt.Errorf("Databend rejected %d rows of %s (the first, line %d: %s); nothing was replaced", o.errors, name, o.firstLine, o.firstError)
		}
		n += o.loaded
	}
	if _, err := ss.query(ctx, "COMMIT"); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	committed = true
	return n, nil
}

// deleteUpTo is the DELETE of table's rows whose coordinates are at or
// below last's offset of their partition.
func deleteUpTo(table string, last map[sink.TopicPartition]int64) string {
	parts := slices.SortedFunc(maps.Keys(last), func(a, b sink.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "DELETE FROM %s WHERE ", table)
	for i, tp := range parts {
		if i > 0 {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, "(%s = %s AND %s = %d AND %s <= %d)", schema.TopicColumn, sqltext.DatabendString(tp.Topic),
			schema.PartitionColumn, tp.Partition, schema.OffsetColumn, last[tp])
	}
	return b.String()
}

// location is the stage path of the sink's files, as SQL: @~/prefix/.
func (s *Sink) location() string {
	return "@" + s.opt.Stage + "/" + s.opt.Prefix
}

// Positions returns the next offset per partition from the ledger.
func (s *Sink) Positions(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	last, err := s.lastLoaded(ctx, s.c.session(), parts)
	if err != nil {
		return nil, err
	}
	next := make(map[sink.TopicPartition]int64, len(last))
	for tp, o := range last {
		next[tp] = o + 1
	}
	return next, nil
}

// lastLoaded reads the last loaded offset of each of parts that the ledger
// knows, in the session ss (inside a load's transaction: its snapshot).
func (s *Sink) lastLoaded(ctx context.Context, ss *session, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	if len(parts) == 0 {
		return map[sink.TopicPartition]int64{}, nil
	}
	want := map[sink.TopicPartition]bool{}
	for _, tp := range parts {
		want[tp] = true
	}
	last, err := s.ledgerPositions(ctx, ss, fmt.Sprintf(" WHERE topic IN (%s)", sqltext.QuoteAll(topicsOf(parts), sqltext.DatabendString)))
	if err != nil {
		return nil, err
	}
	maps.DeleteFunc(last, func(tp sink.TopicPartition, _ int64) bool { return !want[tp] })
	return last, nil
}

// TopicIDs returns the topic id recorded with each partition's furthest
// ledger row that has one (sink.TopicIDKeeper).
func (s *Sink) TopicIDs(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]string, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	// verify opens the sink without Prepare: a ledger an older release
	// made has no topic_id until a run of this release opens it, and
	// recorded no id, as its rows in a ledger grown since.
	desc, err := s.c.session().query(ctx, "DESC "+s.tables.ledger)
	if err != nil {
		return nil, fmt.Errorf("read topic ids from ledger %s: describe it: %w", s.opt.Table+"_ledger", err)
	}
	if !slices.ContainsFunc(desc.Rows, func(row []*string) bool { return len(row) > 0 && row[0] != nil && *row[0] == "topic_id" }) {
		return nil, nil
	}
	want := map[sink.TopicPartition]bool{}
	for _, tp := range parts {
		want[tp] = true
	}
	q := fmt.Sprintf(`SELECT topic, "partition", arg_max(topic_id, last_offset) FROM %s WHERE topic_id IS NOT NULL AND topic IN (%s) GROUP BY topic, "partition"`,
		s.tables.ledger, sqltext.QuoteAll(topicsOf(parts), sqltext.DatabendString))
	res, err := s.c.session().query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read topic ids from ledger %s: %w", s.opt.Table+"_ledger", err)
	}
	out := map[sink.TopicPartition]string{}
	for _, row := range res.Rows {
		if len(row) < 3 || row[0] == nil || row[1] == nil || row[2] == nil {
			continue
		}
		p, err := strconv.ParseInt(*row[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("read topic ids from ledger %s: unexpected row %v", s.opt.Table+"_ledger", deref(row))
		}
		if tp := (sink.TopicPartition{Topic: *row[0], Partition: int32(p)}); want[tp] {
			out[tp] = *row[2]
		}
	}
	return out, nil
}

// ledgerPositions reads the last loaded offset of each partition the
// ledger knows (those of the rows where selects), in the session ss.
func (s *Sink) ledgerPositions(ctx context.Context, ss *session, where string) (map[sink.TopicPartition]int64, error) {
	q := fmt.Sprintf(`SELECT topic, "partition", max(last_offset) FROM %s%s GROUP BY topic, "partition"`, s.tables.ledger, where)
	res, err := ss.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read ledger %s: %w", s.opt.Table+"_ledger", err)
	}
	return partitionCounts(res, "ledger")
}

// topicsOf lists the topics of parts, once each.
func topicsOf(parts []sink.TopicPartition) []string {
	var topics []string
	for _, tp := range parts {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	return topics
}

// partitionCounts reads rows of (topic, partition, number), what a query
// of what read.
func partitionCounts(res *result, what string) (map[sink.TopicPartition]int64, error) {
	out := map[sink.TopicPartition]int64{}
	for _, row := range res.Rows {
		if len(row) < 3 || row[0] == nil || row[1] == nil || row[2] == nil {
			continue
		}
		p, err1 := strconv.ParseInt(*row[1], 10, 32)
		o, err2 := strconv.ParseInt(*row[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("read %s: unexpected row %v", what, deref(row))
		}
		out[sink.TopicPartition{Topic: *row[0], Partition: int32(p)}] = o
	}
	return out, nil
}

// Stage compresses the batch's files and uploads them under names built
// from the batch's offsets: a retry or a restart uploads the same names.
// In transform mode the rows become the bare objects COPY maps onto the
// table by field name; their coordinates stay here.
func (s *Sink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	if len(b.Derived) > 0 && s.opt.Derived == nil {
		return sink.File{}, sink.ErrNoDerivedTable
	}
	f := sink.File{Name: b.Name(), Ranges: b.Ranges, MaxLine: b.MaxLine}
	rows := &keptFile{data: stageableTimes(b.Rows, timestampColumns(s.opt.Typed))}
	// dlq is the batch's dead-letter rows and the objects the checks
	// dead-letter: a new slice, not b.DLQ grown, as the pipeline retries
	// a failed Stage with the same batch, which must check to the same
	// dead letters again, not add them twice.
	dlq := b.DLQ
	if s.opt.Transform {
		var err error
		if rows, err = splitTransformRows(sink.Lines(b.Rows)); err != nil {
			return sink.File{}, err
		}
		if dlq, f.Ranges, err = checkTransformRows(rows, s.userColumns, slices.Clip(b.DLQ), f.Ranges); err != nil {
			return sink.File{}, err
		}
	}
	var err error
	if f.RowsPath, err = s.stageLines(ctx, f.Name, rows); err != nil {
		return sink.File{}, err
	}
	if f.DLQPath, err = s.stageLines(ctx, f.Name+".dlq", &keptFile{data: dlq}); err != nil {
		return sink.File{}, err
	}
	if f.DerivedPath, err = s.stageLines(ctx, f.Name+".derived", &keptFile{data: stageableTimes(b.Derived, timestampColumns(s.opt.Derived))}); err != nil {
		return sink.File{}, err
	}
	for _, n := range []string{f.RowsPath, f.DLQPath, f.DerivedPath} {
		if n != "" {
			f.Bytes += s.stagedBytes(n)
		}
	}
	return f, nil
}

// stageLines uploads k's data as stem + .ndjson[.zst] and keeps k; ""
// when there is none.
func (s *Sink) stageLines(ctx context.Context, stem string, k *keptFile) (string, error) {
	if len(k.data) == 0 {
		return "", nil
	}
	name, n, err := s.put(ctx, stem, k.data)
	if err != nil {
		return "", err
	}
	k.bytes = n
	s.mu.Lock()
	s.kept[name] = k
	s.mu.Unlock()
	return name, nil
}

// put uploads NDJSON data as stem + .ndjson[.zst] and returns the name
// and the bytes.
func (s *Sink) put(ctx context.Context, stem string, data []byte) (string, int64, error) {
	name := stem + ".ndjson"
	upload := func(body []byte) error {
		if err := s.upload(ctx, name, body); err != nil {
			return fmt.Errorf("upload %s to %s: %w", name, s.location(), err)
		}
		return nil
	}
	if !s.opt.Zstd {
		return name, int64(len(data)), upload(data)
	}
	name += ".zst"
	var n int64
	err := s.zstd.Compress(data, func(compressed []byte) error {
		n = int64(len(compressed))
		return upload(compressed)
	})
	return name, n, err
}

func (s *Sink) stagedBytes(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.kept[name]; k != nil {
		return k.bytes
	}
	return 0
}

func (s *Sink) keptLines(name string) *keptFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept[name]
}

func (s *Sink) forget(files []sink.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range files {
		for _, n := range []string{f.RowsPath, f.DLQPath, f.DerivedPath} {
			delete(s.kept, n)
			delete(s.disagree, n)
		}
	}
}

// splitTransformRows turns transform rows ({coordinates…,"value":<object>})
// into the bare objects and their coordinates.
func splitTransformRows(rows [][]byte) (*keptFile, error) {
	k := &keptFile{lines: make([][]byte, len(rows)), coords: make([]coord, len(rows))}
	for i, row := range rows {
		at, err := transformValueAt(row)
		if err != nil {
			return nil, fmt.Errorf("transform row %d: %w", i, err)
		}
		head := append(append([]byte(nil), row[:at]...), '}')
		if err := json.Unmarshal(head, &k.coords[i]); err != nil {
			return nil, fmt.Errorf("transform row %d: %w", i, err)
		}
		k.lines[i] = row[at+len(envelope.TransformValueField) : len(row)-1]
	}
	k.data = sink.JoinLines(k.lines)
	return k, nil
}

// transformValueAt returns where the row's own value field
// (envelope.TransformValueField, its last) starts. Not the first
// `,"value":` of the row: the record's headers come before the value, and
// each is {"key":…,"value":…}, so the fields before the value are walked
// as JSON, the value itself (which may not be valid JSON) left unread.
func transformValueAt(row []byte) (int, error) {
	if len(row) == 0 || row[len(row)-1] != '}' {
		return 0, errors.New("no value field")
	}
	dec := json.NewDecoder(bytes.NewReader(row))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, errors.New("not an object")
	}
	for dec.More() {
		at := int(dec.InputOffset()) // the end of the field before, at its comma
		key, err := dec.Token()
		if err != nil {
			return 0, err
		}
		if key == "value" {
			if !bytes.HasPrefix(row[at:], []byte(envelope.TransformValueField)) {
				return 0, errors.New("the value field is not where it is written")
			}
			return at, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("no value field")
}

// upload puts one file in the stage: by a presigned URL (PRESIGN UPLOAD,
// then PUT straight to object storage) unless the DSN disables presigning
// or StreamingLoad is set, then through the query node's upload endpoint.
// Uploads of all workers share a bound.
func (s *Sink) upload(ctx context.Context, name string, data []byte) error {
	select {
	case s.uploads <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.uploads }()
	if s.c.cfg.PresignedURLDisabled || s.opt.StreamingLoad {
		return s.c.uploadToStage(ctx, s.opt.Stage, s.opt.Prefix, name, data)
	}
	res, err := s.c.session().query(ctx, "PRESIGN UPLOAD "+s.location()+name)
	if err != nil {
		return fmt.Errorf("presign: %w", err)
	}
	method, header, url, err := presigned(res)
	if err != nil {
		return err
	}
	if method != "PUT" {
		return fmt.Errorf("%w: presigned upload wants method %s; tracelake uploads with PUT", sink.ErrFatal, method)
	}
	return s.c.put(ctx, url, header, data)
}

// Discard removes staged files that will not be loaded (their records are
// read from Kafka again). Best effort: a file left behind is harmless, its
// name is only ever loaded through the ledger check.
func (s *Sink) Discard(files []sink.File) {
	s.forget(files)
	// The markers of its attempts whose COMMIT went unanswered go too: one
	// that landed committed its marker, which no later load names.
	for _, m := range s.settle(sink.LoadIdentity(files), nil) {
		files = append(files, sink.File{RowsPath: m})
	}
	if err := s.remove(context.Background(), files); err != nil {
		s.log.Warn("remove staged files", "files", len(files), "err", err)
	}
}

// remove deletes files from the stage with one REMOVE per call.
func (s *Sink) remove(ctx context.Context, files []sink.File) error {
	var names []string
	for _, f := range files {
		for _, n := range []string{f.RowsPath, f.DLQPath, f.DerivedPath} {
			if n != "" {
				names = append(names, regexp.QuoteMeta(n))
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	// The pattern's backslashes (regexp.QuoteMeta) are doubled for Databend's
	// lexer, which would otherwise read a backslash as an escape.
	q := fmt.Sprintf("REMOVE %s PATTERN = %s", s.location(), sqltext.DatabendString(".*("+strings.Join(names, "|")+")$"))
	_, err := s.c.session().query(ctx, q)
	return err
}

func deref(row []*string) []string {
	out := make([]string, len(row))
	for i, v := range row {
		if v == nil {
			out[i] = "NULL"
		} else {
			out[i] = *v
		}
	}
	return out
}

func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if len(q) > 80 {
		q = q[:80] + "…"
	}
	return q
}
