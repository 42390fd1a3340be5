package iceberg

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// SetBeforeMaintenanceCommit runs f before each maintenance commit.
func (s *Sink) SetBeforeMaintenanceCommit(f func()) { s.beforeMaintenanceCommit = f }

// SetBeforeLoadCommit runs f in each load between writing its data files
// and committing them.
func (s *Sink) SetBeforeLoadCommit(f func()) { s.beforeLoadCommit = f }

// SetBeforeCatalogCommit runs f in each load right before its catalog
// commit, after the positions were read.
func (s *Sink) SetBeforeCatalogCommit(f func()) { s.beforeCatalogCommit = func(string) { f() } }

// SetBeforeTableCommit runs f in each load right before its catalog commit
// to a table, named "namespace.table".
func (s *Sink) SetBeforeTableCommit(f func(table string)) { s.beforeCatalogCommit = f }

// SetTableProperty sets a property of the raw table, as another engine
// would.
func (s *Sink) SetTableProperty(ctx context.Context, key, value string) error {
	return s.setProperty(ctx, s.raw, key, value)
}

// SetDLQProperty sets a property of the dead-letter table, as another
// engine would.
func (s *Sink) SetDLQProperty(ctx context.Context, key, value string) error {
	return s.setProperty(ctx, s.dlq, key, value)
}

func (s *Sink) setProperty(ctx context.Context, id table.Identifier, key, value string) error {
	tbl, err := s.loadTable(ctx, id)
	if err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(iceberggo.Properties{key: value}); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// RollBackRaw sets the raw table's current snapshot back by n loads, as
// another engine's rollback_to_snapshot would.
func (s *Sink) RollBackRaw(ctx context.Context, n int) error {
	return s.rollBack(ctx, s.raw, n)
}

// RollBackDLQ is RollBackRaw of the dead-letter table.
func (s *Sink) RollBackDLQ(ctx context.Context, n int) error {
	return s.rollBack(ctx, s.dlq, n)
}

func (s *Sink) rollBack(ctx context.Context, id table.Identifier, n int) error {
	tbl, err := s.loadTable(ctx, id)
	if err != nil {
		return err
	}
	snaps := tbl.Metadata().Snapshots()
	txn := tbl.NewTransaction()
	if err := txn.RollbackToSnapshot(snaps[len(snaps)-1-n].SnapshotID); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// LoadAsBefore stages b and commits its raw rows as a tracelake version
// without the load-time rollback check did: from the positions the
// properties hold, whatever the branch, as a running process of that
// version committed on top of a rollback.
func (s *Sink) LoadAsBefore(ctx context.Context, b *sink.Batch) error {
	f, err := s.Stage(ctx, b)
	if err != nil {
		return err
	}
	s.mu.Lock()
	st := s.kept[f.Name]
	delete(s.kept, f.Name)
	s.mu.Unlock()
	fresh, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	start, err := positions(fresh)
	if err != nil {
		return err
	}
	next := maps.Clone(start)
	for _, r := range st.ranges {
		next[r.TopicPartition] = r.Last + 1
	}
	txn, summary, err := beginPositionsCommit(fresh, start, next, sink.IdentityOf(st.names))
	if err != nil {
		return err
	}
	if err := addFiles(ctx, txn, fresh, s.mainSchema(), st.raw.files, summary); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// AddRawColumn adds an optional string column to the raw table, as a
// user's ALTER TABLE … ADD COLUMN would.
func (s *Sink) AddRawColumn(ctx context.Context, col string) error {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	if err := txn.UpdateSchema(true, false).AddColumn([]string{col}, iceberggo.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// OldestManifest returns the path of the first manifest of the raw
// table's current snapshot (a local warehouse's file).
func (s *Sink) OldestManifest(ctx context.Context) (string, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return "", err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	ms, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		return "", err
	}
	return ms[0].FilePath(), nil
}

// RawProperties returns the raw table's properties.
func (s *Sink) RawProperties(ctx context.Context) (map[string]string, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	return tbl.Properties(), nil
}

// RemovePositions removes the raw table's position properties, as a
// table written by something else would lack them.
func (s *Sink) RemovePositions(ctx context.Context) error {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	var keys []string
	for k := range tbl.Properties() {
		if isPositionKey(k) {
			keys = append(keys, k)
		}
	}
	txn := tbl.NewTransaction()
	if err := txn.RemoveProperties(keys); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// Operations lists the operations of the raw table's snapshots, oldest
// first.
func (s *Sink) Operations(ctx context.Context) ([]string, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	var ops []string
	for _, snap := range tbl.Metadata().Snapshots() {
		ops = append(ops, string(snap.Summary.Operation))
	}
	return ops, nil
}

// DeleteRaw deletes the raw rows of partition p at offset off, as another
// engine's DELETE would (copy-on-write: the file is rewritten without them).
func (s *Sink) DeleteRaw(ctx context.Context, p int32, off int64) error {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	filter := iceberggo.NewAnd(iceberggo.EqualTo(iceberggo.Reference("kpartition"), p), iceberggo.EqualTo(iceberggo.Reference("koffset"), off))
	if err := txn.Delete(ctx, filter, nil); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// CreateLegacyRaw creates the raw table as tracelake did before the Kafka
// columns: six columns, partitioned by add_time's day.
func (s *Sink) CreateLegacyRaw(ctx context.Context) error {
	legacy := iceberggo.NewSchema(0, rawSchema.Fields()[:6]...)
	spec := iceberggo.NewPartitionSpec(iceberggo.PartitionField{SourceIDs: []int{6}, FieldID: dayFieldID, Name: "add_day", Transform: iceberggo.DayTransform{}})
	if err := s.cat.CreateNamespace(ctx, table.Identifier{s.opt.Namespace}, nil); err != nil {
		return err
	}
	_, err := s.cat.CreateTable(ctx, s.raw, legacy, catalog.WithPartitionSpec(&spec))
	return err
}

// ParseEventTime is parseEventTime.
var ParseEventTime = parseEventTime

// Queued is the number of loads waiting for the next group commit.
func (s *Sink) Queued() int {
	s.group.Lock()
	defer s.group.Unlock()
	return len(s.group.queue)
}

// SetBeforeRebuildCommit runs f in each ReplaceDerived right before its
// commit, after its files are written.
func (s *Sink) SetBeforeRebuildCommit(f func()) { s.beforeRebuildCommit = f }

// SetBeforeDedupCommit runs f in each Dedup right before its commit.
func (s *Sink) SetBeforeDedupCommit(f func()) { s.beforeDedupCommit = f }

// RawManifests returns, for each manifest of the raw table's current
// snapshot, whether its entries span more than one day partition (its
// partition summary's bounds differ).
func (s *Sink) RawManifests(ctx context.Context) (spansDays []bool, err error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		sum := m.Partitions()
		spansDays = append(spansDays, len(sum) == 0 || sum[0].LowerBound == nil || string(*sum[0].LowerBound) != string(*sum[0].UpperBound))
	}
	return spansDays, nil
}

// SetSortedRowGroupRows sets the rows per row group of sorted compaction
// until the returned func restores it.
func SetSortedRowGroupRows(n int) (restore func()) {
	old := sortedRowGroupRows
	sortedRowGroupRows = n
	return func() { sortedRowGroupRows = old }
}

// SortOrderColumns names the columns of the raw table's default sort
// order, and tells whether it has the trace_id bloom filter property.
func (s *Sink) SortOrderColumns(ctx context.Context) ([]string, bool, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, false, err
	}
	var cols []string
	for _, f := range tbl.SortOrder().Fields() {
		field, _ := tbl.Schema().FindFieldByID(f.SourceID())
		cols = append(cols, field.Name)
	}
	return cols, tbl.Properties()[bloomColumnKey] == "true", nil
}

// PlanRawHour plans a scan of the raw table's rows whose event time is in
// [from, from+1h), as a query of one hour would, and returns the files it
// would read and how long planning took.
func (s *Sink) PlanRawHour(ctx context.Context, from time.Time) (int, time.Duration, error) {
	start := time.Now()
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return 0, 0, err
	}
	ref := iceberggo.Reference(eventTimeColumn)
	filter := iceberggo.NewAnd(iceberggo.GreaterThanEqual(ref, iceberggo.Timestamp(from.UnixMicro())),
		iceberggo.LessThan(ref, iceberggo.Timestamp(from.Add(time.Hour).UnixMicro())))
	tasks, err := tbl.Scan(table.WithRowFilter(filter)).PlanFiles(ctx)
	return len(tasks), time.Since(start), err
}

// SetCompactionMemory sets the external sort's sizes (sortmerge.go) until
// the returned func restores them.
func SetCompactionMemory(runBytes, mergeBatch, outBatch int64, fanIn int) (restore func()) {
	r, m, o, f := compactRunBytes, mergeBatchBytes, outBatchBytes, mergeFanIn
	compactRunBytes, mergeBatchBytes, outBatchBytes, mergeFanIn = runBytes, mergeBatch, outBatch, fanIn
	return func() { compactRunBytes, mergeBatchBytes, outBatchBytes, mergeFanIn = r, m, o, f }
}

// PeakRowsHeld is the most rows the last sorted compaction held at once.
func PeakRowsHeld() int64 { return peakRowsHeld.Load() }

// RowGroupBytesOf is the row group size compaction writes for a target.
var RowGroupBytesOf = rowGroupBytesOf

// Unsort makes the raw table unsorted, as tables made before their sort
// order was declared at creation are until a maintenance round.
func (s *Sink) Unsort(ctx context.Context) error {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	if err := txn.ReplaceSortOrder(table.UnsortedSortOrder); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// OpenBuffered is what the streams' open writers buffer, by the estimate
// that bounds it.
func (s *Sink) OpenBuffered() int64 {
	s.writing.Lock()
	open := slices.Collect(maps.Values(s.streams))
	s.writing.Unlock()
	var n int64
	for _, e := range open {
		e.mu.Lock()
		for _, t := range e.tables {
			for _, w := range t.parts {
				n += t.buffered(w)
			}
		}
		e.mu.Unlock()
	}
	return n
}

// RekeyDedupTargetAsBefore rewrites the dedup target's dedup_key as a
// release before 66f2b1b made it: each column's text joined with '/'
// unescaped (hashed, for a target keyed by every column), the keys of a
// target merged before an upgrade.
func (s *Sink) RekeyDedupTargetAsBefore(ctx context.Context, identity []string) error {
	tgt, err := s.dedupTarget(ctx)
	if err != nil {
		return err
	}
	sc, err := arrowSchema(tgt, dedupSchema(s.opt.Typed))
	if err != nil {
		return err
	}
	var cols []string
	for _, f := range sc.Fields() {
		cols = append(cols, f.Name)
	}
	tasks, err := tgt.Scan().PlanFiles(ctx)
	if err != nil {
		return err
	}
	var old []iceberggo.DataFile
	for _, t := range tasks {
		old = append(old, t.File)
	}
	_, batches, err := tgt.Scan(table.WithSelectedFields(cols...)).ToArrowRecords(ctx)
	if err != nil {
		return err
	}
	var recs []arrow.RecordBatch
	for rec, err := range batches {
		if err != nil {
			return err
		}
		content := array.NewRecordBatch( // every column but dedup_key
			arrow.NewSchema(sc.Fields()[:len(cols)-1], nil), rec.Columns()[:len(cols)-1], rec.NumRows())
		keyCols, err := keyColumns(content, identity)
		if err != nil {
			return err
		}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range int(rec.NumRows()) {
			var k strings.Builder
			for j, c := range keyCols {
				if j > 0 {
					k.WriteByte('/')
				}
				if c.IsNull(i) {
					k.WriteString("\x00null")
					continue
				}
				k.WriteString(c.ValueStr(i))
			}
			key := k.String()
			if identity == nil {
				sum := md5.Sum([]byte(key))
				key = hex.EncodeToString(sum[:])
			}
			b.Append(key)
		}
		keys := b.NewArray()
		out := append(slices.Clone(rec.Columns()[:len(cols)-1]), keys)
		recs = append(recs, array.NewRecordBatch(sc, out, rec.NumRows()))
	}
	files, err := s.writeFiles(ctx, tgt, sc, func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	txn := tgt.NewTransaction()
	if err := txn.ReplaceDataFilesWithDataFiles(ctx, old, files, nil); err != nil {
		return err
	}
	_, err = txn.Commit(ctx)
	return err
}

// RewroteAll is rewroteAll: whether a compaction's files (written) hold
// the rows of the files they replace (tasks) less their deletes.
var RewroteAll = rewroteAll

// ExpireAsAnotherEngine expires the snapshots of every table older than
// olderThan beyond the newest retainLast, as another engine's
// expire_snapshots would: with none of Expire's checks.
func (s *Sink) ExpireAsAnotherEngine(ctx context.Context, olderThan time.Duration, retainLast int) error {
	for _, id := range s.tableIDs() {
		tbl, err := s.loadTable(ctx, id)
		if err != nil {
			return err
		}
		txn := tbl.NewTransaction()
		if err := txn.ExpireSnapshots(table.WithOlderThan(olderThan), table.WithRetainLast(retainLast)); err != nil {
			return err
		}
		if _, err := txn.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}
