package iceberg

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// DedupKeyColumn is the column of a dedup target holding each row's
// identity.
const DedupKeyColumn = "dedup_key"

// DedupResult is what one deduplicating merge did.
type DedupResult struct {
	Read, Inserted int64 // rows of the increment, and those new to the target
}

// Dedup merges the declared (main) table's rows past the target's
// positions into the target, DedupTable — a table of the same columns and dedup_key,
// partitioned alike, created by the first merge — each identity once: the
// first copy (lowest coordinates) of a row whose identity neither the
// increment nor the target already holds. identity names the columns that
// identify a row (a span: tenant, trace and span id); none: all columns
// but the coordinates, hashed (log records and points have no id). A row
// null in an identity column (a span whose span or trace id is all zero)
// has no identity and is keyed by its columns too (merge.Dedup.Identity).
//
// The target's positions (the same position properties as a loaded table)
// say how far each partition of the source is merged; the new rows and
// the new positions are one commit pinned to the target's snapshot as
// read, so a merge repeated after a crash, or two at once, insert nothing
// twice. The target's keys are read for the increment's event times only:
// the copies of a row share its event time. The increment is held in
// memory: merge often (merge.every) on a busy table.
func (s *Sink) Dedup(ctx context.Context, identity []string) (DedupResult, error) {
	var res DedupResult
	if !s.dedups() {
		return res, errors.New("no dedup table is configured (a declared table's)")
	}
	src, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return res, err
	}
	tgtSchema := dedupSchema(s.opt.Typed)
	tgt, err := s.dedupTarget(ctx)
	if err != nil {
		return res, err
	}
	done, err := positions(tgt)
	if err != nil {
		return res, err
	}
	inc, err := readIncrement(ctx, src, done)
	if err != nil {
		return res, err
	}
	defer inc.release()
	res.Read = inc.rows
	if inc.rows == 0 {
		return res, nil
	}
	kept, legacy, idless, err := inc.firstCopies(identity)
	if err != nil {
		return res, err
	}
	if err := dropKnown(ctx, tgt, s.opt.Typed.Time, inc, kept, legacy); err != nil {
		return res, err
	}
	if err := dropKnownIdless(ctx, tgt, s.opt.Typed.Time, inc, kept, identity, idless); err != nil {
		return res, err
	}
	sc, err := arrowSchema(tgt, tgtSchema)
	if err != nil {
		return res, err
	}
	recs, err := inc.take(ctx, sc, kept)
	if err != nil {
		return res, err
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var files []iceberggo.DataFile
	if len(recs) > 0 {
		// Leased from when each is written until the commit, as a
		// compaction's: `tracelake orphans` keeps them.
		created, release := s.leaseOutput(ctx, tgt.Identifier())
		defer release()
		leased := table.New(tgt.Identifier(), tgt.Metadata(), tgt.MetadataLocation(), noticeCreates(tgt.FS, created), nil)
		if files, err = s.writeFiles(ctx, leased, sc, func(yield func(arrow.RecordBatch, error) bool) {
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
		}); err != nil {
			return res, err
		}
		if err := s.renewLeases(ctx); err != nil {
			s.removeFiles(ctx, tgt, files)
			return res, fmt.Errorf("lease the merge's files before committing them: %w", err)
		}
		if err := s.outputExists(ctx, tgt, files); err != nil {
			s.removeFiles(ctx, tgt, files)
			return res, err
		}
	}
	next := maps.Clone(done)
	for tp, n := range inc.next {
		next[tp] = max(next[tp], n)
	}
	txn := tgt.NewTransaction()
	if err := txn.AssertRefSnapshotID(""); err != nil {
		s.removeFiles(ctx, tgt, files)
		return res, err
	}
	set, err := setPositions(txn, tgt.Properties(), done, next)
	if err == nil {
		summary := maps.Clone(set)
		summary["tracelake.operation"] = "dedup"
		// With no file (all were copies) only the positions move, in an
		// empty snapshot: a commit of properties alone would pass the
		// snapshot assertion after another merge's, and a stale merge
		// would set the positions back.
		err = addFiles(ctx, txn, tgt, tgtSchema, files, summary)
	}
	if err == nil {
		if s.beforeDedupCommit != nil {
			s.beforeDedupCommit()
		}
		_, err = txn.Commit(ctx)
	}
	if err != nil {
		if LostRace(err) {
			s.removeFiles(ctx, tgt, files)
		}
		return res, fmt.Errorf("commit the merge into %s: %w", name(tgt.Identifier()), err)
	}
	for _, r := range recs {
		res.Inserted += r.NumRows()
	}
	return res, nil
}

// dedupSchema is the target's schema: the declared table's and the key.
func dedupSchema(t *schema.Table) *iceberggo.Schema {
	sc := typedSchema(t)
	fields := append(sc.Fields(), iceberggo.NestedField{ID: sc.NumFields() + 1, Name: DedupKeyColumn, Type: iceberggo.PrimitiveTypes.String})
	return iceberggo.NewSchema(0, fields...)
}

// dedups reports whether the sink has a dedup table.
func (s *Sink) dedups() bool { return s.opt.Typed != nil && s.opt.DedupTable != "" }

// dedupTarget creates the target (in the main table's namespace,
// partitioned as it is) or loads it, adding the columns declared since
// it was made.
func (s *Sink) dedupTarget(ctx context.Context) (*table.Table, error) {
	id, sc := s.sibling(s.opt.DedupTable), dedupSchema(s.opt.Typed)
	tbl, err := s.createTable(ctx, id, sc, typedSpec(s.opt.Typed, sc))
	if err != nil {
		return nil, err
	}
	// A target made before the declared table gained columns gains them
	// too, after its dedup_key.
	if tbl, err = s.addColumns(ctx, tbl, sc); err != nil {
		return nil, err
	}
	if diff := diffSchema(sc, tbl.Schema()); len(diff) > 0 {
		return nil, fmt.Errorf("table %s is not a dedup target of %s: %s", name(id), name(s.raw), strings.Join(diff, "; "))
	}
	return tbl, nil
}

// sibling is table name's identifier in the main table's namespace.
func (s *Sink) sibling(name string) table.Identifier {
	return append(append(table.Identifier{}, s.raw[:len(s.raw)-1]...), name)
}

// increment is the source's rows past the target's positions, as scanned.
type increment struct {
	recs []arrow.RecordBatch
	rows int64
	next map[sink.TopicPartition]int64 // past the increment's last offset
}

func (inc *increment) release() {
	for _, r := range inc.recs {
		r.Release()
	}
}

// rowRef is one row of an increment: its batch and its index there.
type rowRef struct{ rec, row int }

// readIncrement scans src for the rows past done, per partition. The scan
// filter prunes files; each row is checked again here.
func readIncrement(ctx context.Context, src *table.Table, done map[sink.TopicPartition]int64) (*increment, error) {
	var opts []table.ScanOption
	var filters []iceberggo.BooleanExpression
	for tp, n := range done {
		filters = append(filters, iceberggo.NewNot(iceberggo.NewAnd(
			iceberggo.EqualTo(iceberggo.Reference(schema.TopicColumn), tp.Topic),
			iceberggo.EqualTo(iceberggo.Reference(schema.PartitionColumn), tp.Partition),
			iceberggo.LessThan(iceberggo.Reference(schema.OffsetColumn), n))))
	}
	switch len(filters) {
	case 0:
	case 1:
		opts = append(opts, table.WithRowFilter(filters[0]))
	default:
		opts = append(opts, table.WithRowFilter(iceberggo.NewAnd(filters[0], filters[1], filters[2:]...)))
	}
	_, batches, err := src.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", name(src.Identifier()), err)
	}
	inc := &increment{next: map[sink.TopicPartition]int64{}}
	for rec, err := range batches {
		if err != nil {
			inc.release()
			return nil, fmt.Errorf("scan %s: %w", name(src.Identifier()), err)
		}
		mask, n, err := inc.past(rec, done)
		if err != nil {
			rec.Release()
			inc.release()
			return nil, err
		}
		if n < rec.NumRows() {
			kept, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
			rec.Release()
			if err != nil {
				mask.Release()
				inc.release()
				return nil, fmt.Errorf("filter the increment: %w", err)
			}
			rec = kept
		}
		mask.Release()
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		inc.recs = append(inc.recs, rec)
		inc.rows += rec.NumRows()
	}
	return inc, nil
}

// past marks the rows of rec past done, counts them and moves inc.next
// past them.
func (inc *increment) past(rec arrow.RecordBatch, done map[sink.TopicPartition]int64) (*array.Boolean, int64, error) {
	c, err := coordinates(rec)
	if err != nil {
		return nil, 0, err
	}
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	var n int64
	for i := range int(rec.NumRows()) {
		tp := sink.TopicPartition{Topic: c.topic.Value(i), Partition: c.partition.Value(i)}
		off := c.offset.Value(i)
		keep := off >= done[tp]
		b.Append(keep)
		if keep {
			n++
			inc.next[tp] = max(inc.next[tp], off+1)
		}
	}
	return b.NewBooleanArray(), n, nil
}

// coords are a batch's coordinate columns.
type coords struct {
	topic            *array.String
	partition, index *array.Int32
	offset           *array.Int64
}

func coordinates(rec arrow.RecordBatch) (coords, error) {
	var c coords
	var ok [4]bool
	for i, f := range rec.Schema().Fields() {
		switch f.Name {
		case schema.TopicColumn:
			c.topic, ok[0] = rec.Column(i).(*array.String)
		case schema.PartitionColumn:
			c.partition, ok[1] = rec.Column(i).(*array.Int32)
		case schema.OffsetColumn:
			c.offset, ok[2] = rec.Column(i).(*array.Int64)
		case schema.IndexColumn:
			c.index, ok[3] = rec.Column(i).(*array.Int32)
		}
	}
	if ok != [4]bool{true, true, true, true} {
		return c, fmt.Errorf("the scanned rows lack typed coordinate columns (%s)", rec.Schema())
	}
	return c, nil
}

// firstCopies returns, by key, the first copy (lowest coordinates) of each
// identity in the increment; legacy: the keys of those whose key differs
// from the one a release before the escaping (rowKeys) gave them, by that
// older key; and idless: the content columns by which rows without an
// identity are keyed (nil when the increment has none; dropKnownIdless).
func (inc *increment) firstCopies(identity []string) (kept map[string]rowRef, legacy map[string][]string, idless []string, err error) {
	cs := make([]coords, len(inc.recs))
	for i, rec := range inc.recs {
		c, err := coordinates(rec)
		if err != nil {
			return nil, nil, nil, err
		}
		cs[i] = c
	}
	before := func(a, b rowRef) bool {
		ca, cb := cs[a.rec], cs[b.rec]
		if x, y := ca.topic.Value(a.row), cb.topic.Value(b.row); x != y {
			return x < y
		}
		if x, y := ca.partition.Value(a.row), cb.partition.Value(b.row); x != y {
			return x < y
		}
		if x, y := ca.offset.Value(a.row), cb.offset.Value(b.row); x != y {
			return x < y
		}
		return ca.index.Value(a.row) < cb.index.Value(b.row)
	}
	kept = map[string]rowRef{}
	legacy = map[string][]string{}
	for ri, rec := range inc.recs {
		keyer, err := newRowKeyer(rec, identity)
		if err != nil {
			return nil, nil, nil, err
		}
		for i := range int(rec.NumRows()) {
			cols, hashed := keyer.of(i)
			k, was := rowKeys(cols, i, hashed)
			if hashed && identity != nil && idless == nil {
				idless = contentNames(rec)
			}
			ref := rowRef{ri, i}
			if old, ok := kept[k]; !ok || before(ref, old) {
				kept[k] = ref
			}
			if was != "" && !slices.Contains(legacy[was], k) {
				legacy[was] = append(legacy[was], k)
			}
		}
	}
	return kept, legacy, idless, nil
}

// rowKeyer picks the columns each row of a batch is keyed by.
type rowKeyer struct {
	ids     []arrow.Array // the identity's columns; nil for rows without ids
	content []arrow.Array // keyColumns(rec, nil)
}

func newRowKeyer(rec arrow.RecordBatch, identity []string) (rowKeyer, error) {
	content, err := keyColumns(rec, nil)
	if err != nil || identity == nil {
		return rowKeyer{content: content}, err
	}
	ids, err := keyColumns(rec, identity)
	return rowKeyer{ids: ids, content: content}, err
}

// of is the columns row i is keyed by and whether its key is their hash:
// its identity's, or its content's when it has none — no identity
// columns, or a null in one (merge.Dedup.Identity). Joined with the null,
// the ids of all such spans of a trace were one key, and the merge kept
// one of them. A row with its ids keeps the key it always had.
func (k rowKeyer) of(i int) (cols []arrow.Array, hashed bool) {
	if k.ids == nil || slices.ContainsFunc(k.ids, func(c arrow.Array) bool { return c.IsNull(i) }) {
		return k.content, true
	}
	return k.ids, false
}

// contentNames names the content columns of rec, in their order.
func contentNames(rec arrow.RecordBatch) []string {
	var names []string
	for _, f := range rec.Schema().Fields() {
		if inContentKey(f.Name) {
			names = append(names, f.Name)
		}
	}
	return names
}

// inContentKey says whether a column of a scanned row (the source's or
// the target's) is part of its content key: every column but the
// coordinates, the target's key and the exact copies of another
// (schema.InContentKey).
func inContentKey(col string) bool {
	return !isCoordinate(col) && col != DedupKeyColumn && schema.InContentKey(col)
}

// keyColumns are the columns of rec a row's key is made of: identity, or
// its content's (inContentKey), in rec's order.
func keyColumns(rec arrow.RecordBatch, identity []string) ([]arrow.Array, error) {
	var cols []arrow.Array
	if identity == nil {
		for i, f := range rec.Schema().Fields() {
			if inContentKey(f.Name) {
				cols = append(cols, rec.Column(i))
			}
		}
		return cols, nil
	}
	for _, name := range identity {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("the table has no identity column %s", name)
		}
		cols = append(cols, rec.Column(idx[0]))
	}
	return cols, nil
}

func isCoordinate(col string) bool {
	for _, c := range schema.Coordinates {
		if c.Name == col {
			return true
		}
	}
	return false
}

// keyEscaper escapes a value of a row's key: its separator '/', the
// escape '\' itself, and NUL, which starts the null marker.
var keyEscaper = strings.NewReplacer(`\`, `\\`, "/", `\/`, "\x00", `\0`)

// rowKey is row i's key over cols: the values joined, or (hashed) their
// MD5 — 128 bits, so billions of distinct rows do not collide. Each value
// is escaped (keyEscaper) before it is joined: the joined text of two
// different rows must differ, or the dedup merge keeps one of them as the
// other's copy (a log record of scope "a/b" version "1" and one of scope
// "a" version "b/1" had one key). A value without '/', '\' or NUL is
// written as it is, so the keys of such rows stay those made before.
func rowKey(cols []arrow.Array, i int, hashed bool) string {
	k, _ := rowKeys(cols, i, hashed)
	return k
}

// rowKeys is row i's key (rowKey) and, when it differs, the key a release
// before the escaping gave it (the values joined as they are; "" when
// the same): a target merged before holds its rows under those, and a
// copy of one of them (a client's retry across the upgrade) must be found
// there by it, or it is merged as a row of its own (dropKnown).
func rowKeys(cols []arrow.Array, i int, hashed bool) (key, legacy string) {
	key, escaped := joinValues(cols, i, true)
	if escaped {
		// Rare (a value with '/', '\' or NUL): only then is the older key
		// made, in a second pass.
		legacy, _ = joinValues(cols, i, false)
	}
	if hashed {
		key = md5Hex(key)
		if escaped {
			legacy = md5Hex(legacy)
		}
	}
	return key, legacy
}

// joinValues joins row i's values of cols with '/', a null as "\x00null"
// (no escaped value holds a NUL), each value escaped if escape holds;
// escaped reports whether some value needed it.
func joinValues(cols []arrow.Array, i int, escape bool) (joined string, escaped bool) {
	var b strings.Builder
	for j, c := range cols {
		if j > 0 {
			b.WriteByte('/')
		}
		if c.IsNull(i) {
			b.WriteString("\x00null")
			continue
		}
		v := c.ValueStr(i)
		if escape && strings.ContainsAny(v, "/\\\x00") {
			v, escaped = keyEscaper.Replace(v), true
		}
		b.WriteString(v)
	}
	return b.String(), escaped
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// dropKnown removes from kept the keys the target already holds, reading
// the target's keys of the increment's event times only, and those whose
// key before the escaping (legacy, by that key) it holds: rows a release
// before it merged.
func dropKnown(ctx context.Context, tgt *table.Table, timeCol string, inc *increment, kept map[string]rowRef, legacy map[string][]string) error {
	opts := []table.ScanOption{table.WithSelectedFields(DedupKeyColumn)}
	if f := inc.times(timeCol); f != nil {
		opts = append(opts, table.WithRowFilter(f))
	}
	if tgt.CurrentSnapshot() == nil {
		return nil
	}
	_, batches, err := tgt.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return fmt.Errorf("scan %s: %w", name(tgt.Identifier()), err)
	}
	for rec, err := range batches {
		if err != nil {
			return fmt.Errorf("scan %s: %w", name(tgt.Identifier()), err)
		}
		keys, ok := rec.Column(0).(*array.String)
		if !ok {
			rec.Release()
			return fmt.Errorf("%s.%s is not a string column", name(tgt.Identifier()), DedupKeyColumn)
		}
		for i := range keys.Len() {
			k := keys.Value(i)
			delete(kept, k)
			for _, nk := range legacy[k] {
				delete(kept, nk)
			}
		}
		rec.Release()
	}
	return nil
}

// dropKnownIdless removes from kept the rows without an identity (a null
// in identity) whose content a row of the target has: those of the
// increment's event times, read with the columns of their content key
// (idless; nil when the increment has none: nothing is read).
//
// Their stored key does not say: a release before content keys for spans
// kept such a span under its ids joined with the null, the key of all
// such spans of its trace. Looked up by it (as dropKnown's legacy keys
// are), every new span of that trace would be dropped as a copy; not
// looked up, a copy sent again after the upgrade (a client's retry) would
// be kept twice. An Iceberg file cannot be updated in place as the
// DuckDB and Databend targets are (merge.Dedup.rekeySQL), so the target's
// such rows are read and keyed by their content at each merge whose
// increment holds one. That stays cheap: a zero id is invalid OTLP, so
// such rows are rare, the files without a null id are pruned by their
// null counts, and the others by the event times.
func dropKnownIdless(ctx context.Context, tgt *table.Table, timeCol string, inc *increment, kept map[string]rowRef, identity, idless []string) error {
	if idless == nil || tgt.CurrentSnapshot() == nil {
		return nil
	}
	nulls := make([]iceberggo.BooleanExpression, len(identity))
	for i, c := range identity {
		nulls[i] = iceberggo.IsNull(iceberggo.Reference(c))
	}
	filter := nulls[0]
	if len(nulls) > 1 {
		filter = iceberggo.NewOr(nulls[0], nulls[1], nulls[2:]...)
	}
	if f := inc.times(timeCol); f != nil {
		filter = iceberggo.NewAnd(filter, f)
	}
	cols := slices.Clone(idless)
	for _, c := range identity {
		if !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
	}
	_, batches, err := tgt.Scan(table.WithSelectedFields(cols...), table.WithRowFilter(filter)).ToArrowRecords(ctx)
	if err != nil {
		return fmt.Errorf("scan %s: %w", name(tgt.Identifier()), err)
	}
	for rec, err := range batches {
		if err != nil {
			return fmt.Errorf("scan %s: %w", name(tgt.Identifier()), err)
		}
		ids, err := keyColumns(rec, identity)
		var content []arrow.Array
		if err == nil {
			// By name, in the increment's order: the target has its key
			// and the columns added since it was made after those.
			content, err = keyColumns(rec, idless)
		}
		if err != nil {
			rec.Release()
			return err
		}
		keyer := rowKeyer{ids: ids, content: content}
		for i := range int(rec.NumRows()) {
			if cols, hashed := keyer.of(i); hashed {
				delete(kept, rowKey(cols, i, true))
			}
		}
		rec.Release()
	}
	return nil
}

// times is the scan filter of the target's rows of the increment's event
// times in timeCol, or of a null time (nil without an event time).
func (inc *increment) times(timeCol string) iceberggo.BooleanExpression {
	if timeCol == "" {
		return nil
	}
	ref := iceberggo.Reference(timeCol)
	lo, hi, ok := inc.timeRange(timeCol)
	if !ok { // every event time is null
		return iceberggo.IsNull(ref)
	}
	within := iceberggo.NewAnd(iceberggo.GreaterThanEqual(ref, iceberggo.Timestamp(lo)), iceberggo.LessThanEqual(ref, iceberggo.Timestamp(hi)))
	return iceberggo.NewOr(within, iceberggo.IsNull(ref))
}

// timeRange is the range of the increment's timestamps in col (µs), ok
// false when all are null.
func (inc *increment) timeRange(col string) (lo, hi int64, ok bool) {
	for _, rec := range inc.recs {
		idx := rec.Schema().FieldIndices(col)
		if len(idx) == 0 {
			continue
		}
		ts, isTS := rec.Column(idx[0]).(*array.Timestamp)
		if !isTS {
			continue
		}
		for i := range ts.Len() {
			if ts.IsNull(i) {
				continue
			}
			v := int64(ts.Value(i))
			if !ok || v < lo {
				lo = v
			}
			if !ok || v > hi {
				hi = v
			}
			ok = true
		}
	}
	return lo, hi, ok
}

// take builds the target's batches (schema sc: the source's columns and
// the key) of the kept rows.
func (inc *increment) take(ctx context.Context, sc *arrow.Schema, kept map[string]rowRef) ([]arrow.RecordBatch, error) {
	byRec := make([][]int64, len(inc.recs))
	keys := make([][]string, len(inc.recs))
	for k, ref := range kept {
		byRec[ref.rec] = append(byRec[ref.rec], int64(ref.row))
		keys[ref.rec] = append(keys[ref.rec], k)
	}
	var out []arrow.RecordBatch
	release := func() {
		for _, r := range out {
			r.Release()
		}
	}
	for ri, rows := range byRec {
		if len(rows) == 0 {
			continue
		}
		rec, err := takeRows(ctx, inc.recs[ri], sc, rows, keys[ri])
		if err != nil {
			release()
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// takeRows is the rows of rec at rows with their keys, as a batch of sc.
func takeRows(ctx context.Context, rec arrow.RecordBatch, sc *arrow.Schema, rows []int64, keys []string) (arrow.RecordBatch, error) {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues(rows, nil)
	indices := ib.NewArray()
	ib.Release()
	defer indices.Release()
	cols := make([]arrow.Array, 0, sc.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, f := range sc.Fields() {
		if f.Name == DedupKeyColumn {
			kb := array.NewStringBuilder(memory.DefaultAllocator)
			kb.AppendValues(keys, nil)
			cols = append(cols, kb.NewArray())
			kb.Release()
			continue
		}
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("the scanned rows lack column %s", f.Name)
		}
		col, err := compute.TakeArray(ctx, rec.Column(idx[0]), indices)
		if err != nil {
			return nil, fmt.Errorf("take the rows of column %s: %w", f.Name, err)
		}
		if !arrow.TypeEqual(col.DataType(), f.Type) {
			cast, err := compute.CastArray(ctx, col, compute.SafeCastOptions(f.Type))
			col.Release()
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", f.Name, err)
			}
			col = cast
		}
		cols = append(cols, col)
	}
	return array.NewRecordBatch(sc, cols, int64(len(rows))), nil
}

// DedupCounts are what verify reports of a declared table's copies.
type DedupCounts struct {
	Rows       int64 // rows of the source table
	Identities int64 // distinct identities among them
	Kept       int64 // rows of the target
	Pending    int64 // source rows past the target's positions
}

// DedupCounts scans the source and the target (see Dedup) and counts
// them. The source's identities are held as 16-byte digests while it
// counts: about 50 bytes a row.
func (s *Sink) DedupCounts(ctx context.Context, identity []string) (DedupCounts, error) {
	var c DedupCounts
	if !s.dedups() {
		return c, errors.New("no dedup table is configured (a declared table's)")
	}
	src, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return c, err
	}
	done := map[sink.TopicPartition]int64{}
	id := s.sibling(s.opt.DedupTable)
	tgt, err := s.cat.LoadTable(ctx, id)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		tgt = nil // never merged: every row is pending
	case err != nil:
		return c, fmt.Errorf("load table %s: %w", name(id), err)
	default:
		if done, err = positions(tgt); err != nil {
			return c, err
		}
	}
	_, batches, err := src.Scan().ToArrowRecords(ctx)
	if err != nil {
		return c, fmt.Errorf("scan %s: %w", name(src.Identifier()), err)
	}
	seen := map[[md5.Size]byte]struct{}{}
	for rec, err := range batches {
		if err != nil {
			return c, fmt.Errorf("scan %s: %w", name(src.Identifier()), err)
		}
		err = countRows(rec, identity, done, seen, &c)
		rec.Release()
		if err != nil {
			return c, err
		}
	}
	c.Identities = int64(len(seen))
	if tgt == nil || tgt.CurrentSnapshot() == nil {
		return c, nil
	}
	_, batches, err = tgt.Scan(table.WithSelectedFields(DedupKeyColumn)).ToArrowRecords(ctx)
	if err != nil {
		return c, fmt.Errorf("scan %s: %w", name(id), err)
	}
	for rec, err := range batches {
		if err != nil {
			return c, fmt.Errorf("scan %s: %w", name(id), err)
		}
		c.Kept += rec.NumRows()
		rec.Release()
	}
	return c, nil
}

// countRows adds rec's rows, their identities and those past done to c.
func countRows(rec arrow.RecordBatch, identity []string, done map[sink.TopicPartition]int64, seen map[[md5.Size]byte]struct{}, c *DedupCounts) error {
	co, err := coordinates(rec)
	if err != nil {
		return err
	}
	keyer, err := newRowKeyer(rec, identity)
	if err != nil {
		return err
	}
	for i := range int(rec.NumRows()) {
		c.Rows++
		// Unhashed: the digest is the key's. A join of the ids never
		// equals one of the content, which has more columns, so more
		// separators (an escaped value has no bare '/').
		cols, _ := keyer.of(i)
		seen[md5.Sum([]byte(rowKey(cols, i, false)))] = struct{}{}
		if co.offset.Value(i) >= done[sink.TopicPartition{Topic: co.topic.Value(i), Partition: co.partition.Value(i)}] {
			c.Pending++
		}
	}
	return nil
}
