package iceberg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// Maintenance (compact, expire, orphan cleanup) runs beside live loads,
// often in another process. Every commit it makes is a compare-and-swap
// on the table like a load's; the loser of a race re-reads the table and
// tries again. None of it touches the positions: they are a table
// property, which replacing files and removing snapshots leave as they
// are.

// maintenanceAttempts bounds the retries of one maintenance commit that
// keeps losing races with loads.
const maintenanceAttempts = 20

// Compaction reports what compacting one table did (or would do).
type Compaction struct {
	Table                   string
	Groups                  int
	FilesBefore, FilesAfter int
	BytesBefore, BytesAfter int64
}

// Compact rewrites the small data files of each day partition into files
// of about targetBytes, one partition group per commit. A day that ends
// after settled is left alone: loads are still adding files to it, and
// rewriting it would race them only to be redone. With dryRun it only
// plans (FilesAfter and BytesAfter are then estimates).
func (s *Sink) Compact(ctx context.Context, targetBytes int64, settled time.Time, dryRun bool) ([]Compaction, error) {
	return s.compact(ctx, targetBytes, func(day int, g compaction.Group) bool { return dayEndedBy(g.Tasks, day, settled) }, dryRun)
}

// compact rewrites the groups (one per partition) for which pick is true,
// given the table's day partition field (dayField).
func (s *Sink) compact(ctx context.Context, targetBytes int64, pick func(day int, g compaction.Group) bool, dryRun bool) ([]Compaction, error) {
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = targetBytes
	cfg.MinFileSizeBytes = targetBytes * 3 / 4
	cfg.MaxFileSizeBytes = targetBytes * 9 / 5
	cfg.MinInputFiles = 2 // two small files of a day are already worth one
	var out []Compaction
	if !dryRun {
		s.startLeases()
	}
	for _, id := range s.tableIDs() {
		tbl, err := s.loadTable(ctx, id)
		if err != nil {
			return out, err
		}
		plan, err := compaction.Analyze(ctx, tbl, cfg)
		if err != nil {
			return out, fmt.Errorf("plan compaction of %s: %w", name(id), err)
		}
		day := dayField(tbl.Spec())
		plan.Groups = slices.DeleteFunc(byPartition(plan.Groups), func(g compaction.Group) bool { return !pick(day, g) })
		c := Compaction{Table: name(id), Groups: len(plan.Groups)}
		for _, g := range plan.Groups {
			c.FilesBefore += len(g.Tasks)
			c.BytesBefore += g.TotalSizeBytes
		}
		if dryRun {
			c.FilesAfter, c.BytesAfter = plan.EstOutputFiles, plan.EstOutputBytes
			out = append(out, c)
			continue
		}
		for _, g := range plan.Groups {
			res, err := s.compactLeased(ctx, tbl, g, targetBytes)
			if errors.Is(err, errGroupChanged) {
				s.log.Warn("compaction group left as it is: another writer changed its files since they were read",
					"table", name(id), "partition", g.PartitionKey, "err", err)
				continue
			}
			if err != nil {
				return append(out, c), fmt.Errorf("compact %s: %w", name(id), err)
			}
			c.FilesAfter += len(res.NewDataFiles)
			c.BytesAfter += res.BytesAfter
			s.log.Info("compacted", "table", name(id), "partition", g.PartitionKey,
				"files", len(res.OldDataFiles), "into", len(res.NewDataFiles), "bytes", res.BytesAfter)
		}
		out = append(out, c)
	}
	return out, nil
}

// compactLeased compacts group g of tbl and commits it, the files it
// writes listed in the process's leases from when each is written until
// the commit, so that `tracelake orphans` keeps them however long the
// compaction takes; before the commit it checks they are all there.
func (s *Sink) compactLeased(ctx context.Context, tbl *table.Table, g compaction.Group, targetBytes int64) (table.CompactionGroupResult, error) {
	created, release := s.leaseOutput(ctx, tbl.Identifier())
	defer release()
	res, err := compactGroup(ctx, tbl, g, targetBytes, created)
	if err == nil {
		err = rewroteAll(g.Tasks, res.NewDataFiles)
	}
	if err != nil {
		s.removeFiles(ctx, tbl, res.NewDataFiles)
		return res, err
	}
	// Leased now, not at the next renewal, and looked up: one written
	// long ago may be gone already.
	if err := s.renewLeases(ctx); err != nil {
		s.removeFiles(ctx, tbl, res.NewDataFiles)
		return res, fmt.Errorf("lease the compacted files before committing them: %w", err)
	}
	if err := s.outputExists(ctx, tbl, res.NewDataFiles); err != nil {
		s.removeFiles(ctx, tbl, res.NewDataFiles)
		return res, err
	}
	return res, s.replaceFiles(ctx, tbl, g.Tasks, res)
}

// leaseOutput lists the files a compaction, a merge or a rebuild
// (ReplaceDerived) writes into table id (created is told of each as it is
// created) in the process's leases until release, which writes the leases
// again without them.
func (s *Sink) leaseOutput(ctx context.Context, id table.Identifier) (created func(path string), release func()) {
	// A process that stages nothing (`tracelake merge`, `merge --rebuild`)
	// has no leases running until now: renewLeases writes none before.
	s.startLeases()
	out := &leased{id: id}
	s.mu.Lock()
	if s.compacting == nil {
		s.compacting = map[*leased]bool{}
	}
	s.compacting[out] = true
	s.mu.Unlock()
	created = func(path string) {
		s.mu.Lock()
		out.files = append(out.files, path)
		s.mu.Unlock()
	}
	release = func() {
		s.mu.Lock()
		delete(s.compacting, out)
		s.mu.Unlock()
		// Committed or removed: the lease lists them no longer (a lease
		// left would outlive the process's interest in the table).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseInterval)
		defer cancel()
		if err := s.renewLeases(rctx); err != nil {
			s.log.Warn("could not rewrite the staging leases after a compaction or merge; they are rewritten within 5 minutes", "err", err)
		}
	}
	return created, release
}

// outputExists checks that a compaction's (or merge's) files are all
// there before it commits them: a commit must never reference a file
// that is gone.
func (s *Sink) outputExists(ctx context.Context, tbl *table.Table, files []iceberggo.DataFile) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	for _, df := range files {
		if err := exists(fsys, df.FilePath()); err != nil {
			return fmt.Errorf("written file %s is gone before its commit (deleted by another tool's orphan cleanup?); nothing was committed: %w", df.FilePath(), err)
		}
	}
	return nil
}

// byPartition joins the planner's groups of each partition into one:
// iceberg-go bin-packs a partition's small files into groups of about the
// target size, each rewritten on its own, so the sorted files of one
// group overlap those of the others in every sort key (a trace-id lookup
// opens one file per group), and a partition whose small files sum to
// many times the target never counts as holding SmallFiles of them.
// Compaction streams (sortmerge.go), so a partition's files together cost
// no more memory than a group's; the output is rolled at the target.
func byPartition(groups []compaction.Group) []compaction.Group {
	var out []compaction.Group
	at := map[string]int{}
	for _, g := range groups {
		i, ok := at[g.PartitionKey]
		if !ok {
			at[g.PartitionKey] = len(out)
			out = append(out, compaction.Group{PartitionKey: g.PartitionKey})
			i = len(out) - 1
		}
		out[i].Tasks = append(out[i].Tasks, g.Tasks...)
	}
	for i := range out {
		out[i].Tasks = wholeFiles(out[i].Tasks)
		for _, t := range out[i].Tasks {
			out[i].TotalSizeBytes += t.File.FileSizeBytes()
			out[i].DeleteFileCount += deletesOf(t)
		}
	}
	return out
}

// wholeFiles is tasks with one task per data file, reading all of it.
// Scan planning splits a Parquet file larger than the table's
// read.split.target-size (128 MiB by default) into a task per range of
// row groups, and the planner bin-packs those as files of their own: a
// rewrite listing one file once per range is refused by iceberg-go
// ("delete data file paths must be unique"), and one given some of its
// ranges only (the planner drops a bin of one task) would remove the
// file with the rows of the others not rewritten.
func wholeFiles(tasks []table.FileScanTask) []table.FileScanTask {
	out := make([]table.FileScanTask, 0, len(tasks))
	seen := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		if seen[t.File.FilePath()] {
			continue
		}
		seen[t.File.FilePath()] = true
		t.Start, t.Length = 0, t.File.FileSizeBytes()
		out = append(out, t)
	}
	return out
}

// compactGroup rewrites a group's files: in the table's declared sort
// order (sorted.go) when it has one and the files no deletes, else as
// iceberg-go does, streaming a file at a time into files rolled at the
// target (sorted.go, "Output files at the target size"). created is told
// of each file before it is created: iceberg-go names them only once it
// wrote them all.
func compactGroup(ctx context.Context, tbl *table.Table, g compaction.Group, targetBytes int64, created func(path string)) (table.CompactionGroupResult, error) {
	tbl = table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), noticeCreates(tbl.FS, created), nil)
	if tbl.SortOrder().Len() > 0 && !slices.ContainsFunc(g.Tasks, func(t table.FileScanTask) bool { return deletesOf(t) > 0 }) {
		return compactGroupSorted(ctx, tbl, g.Tasks, g.TotalSizeBytes, targetBytes)
	}
	rgRows := rowGroupRows(g.Tasks, targetBytes)
	return table.ExecuteCompactionGroup(ctx, compactView(tbl, rgRows), table.CompactionTaskGroup{
		PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes,
	}, table.WithCompactionTargetFileSize(writerTarget(targetBytes)), table.WithCompactionScanConcurrency(1),
		table.WithCompactionArrowBatchSize(min(compactReadBatchRows, rgRows)), table.WithCompactionRecordBatchBufferSize(compactWriteQueue),
		table.WithCompactionParquetRowGroupLimit(rgRows))
}

// rewroteAll checks, by the record counts the manifests will hold, that
// the files a compaction wrote (written) hold the rows of the files they
// replace (tasks) less those the files' deletes remove, before they are
// committed, as a load checks its files (wroteAll): a bug anywhere in
// the reading, sorting or writing is an error then, not rows doubled or
// lost for good.
// The deletes' rows are not read, so with deletes it checks bounds: each
// row of a position delete file or a deletion vector deletes one row at
// most (one may name a row of a file outside the group, or one deleted
// already), an equality delete any number; rows are never added.
func rewroteAll(tasks []table.FileScanTask, written []iceberggo.DataFile) error {
	var rows, deletable int64
	byEquality := false
	read, seen := map[string]bool{}, map[string]bool{} // data files, delete files
	for _, t := range tasks {
		// A file twice in the group (a planner's split, or a bug) holds
		// its rows once: read twice they are doubled.
		if read[t.File.FilePath()] {
			continue
		}
		read[t.File.FilePath()] = true
		rows += t.File.Count()
		byEquality = byEquality || len(t.EqualityDeleteFiles) > 0
		for _, files := range [][]iceberggo.DataFile{t.DeleteFiles, t.DeletionVectorFiles} {
			for _, df := range files {
				// A delete file applies to many files of the group, and a
				// Puffin file holds the vectors of many: each counts once.
				key := df.FilePath()
				if off := df.ContentOffset(); off != nil {
					key = fmt.Sprintf("%s@%d", key, *off)
				}
				if !seen[key] {
					seen[key] = true
					deletable += df.Count()
				}
			}
		}
	}
	least := max(rows-deletable, 0)
	if byEquality {
		least = 0
	}
	var n int64
	for _, df := range written {
		n += df.Count()
	}
	switch {
	case n > rows:
		return fmt.Errorf("the %d compacted files hold %d rows, more than the %d of the %d files they replace: rows would be doubled; nothing was committed",
			len(written), n, rows, len(read))
	case n < least:
		return fmt.Errorf("the %d compacted files hold %d rows, fewer than the %d of the %d files they replace less the %d their deletes remove at most: rows would be lost; nothing was committed",
			len(written), n, rows, len(read), deletable)
	}
	return nil
}

// noticeCreates is fsF's file system telling created of each file before
// it creates it.
func noticeCreates(fsF func(context.Context) (icebergio.IO, error), created func(path string)) func(context.Context) (icebergio.IO, error) {
	return func(ctx context.Context) (icebergio.IO, error) {
		fsys, err := fsF(ctx)
		if err != nil {
			return nil, err
		}
		w, ok := fsys.(icebergio.WriteFileIO)
		if !ok {
			return fsys, nil
		}
		return createNoticer{w, created}, nil
	}
}

// createNoticer is a file system telling created of each file before it
// creates it.
type createNoticer struct {
	icebergio.WriteFileIO
	created func(path string)
}

func (c createNoticer) Create(path string) (icebergio.FileWriter, error) {
	c.created(path)
	return c.WriteFileIO.Create(path)
}

// dayField is the ID of spec's day partition field, -1 if it has none.
// By its transform, not dayFieldID: iceberg-go gives a new table's
// partition fields IDs of its own, in order (a span table's tenant field
// comes first and gets 1000).
func dayField(spec iceberggo.PartitionSpec) int {
	for _, f := range spec.Fields() {
		if _, ok := f.Transform.(iceberggo.DayTransform); ok {
			return f.FieldID
		}
	}
	return -1
}

// dayEndedBy reports whether the day partition (field day) of tasks (all
// of one partition) ended by t. A file without a day partition (a table
// partitioned otherwise) counts as ended.
func dayEndedBy(tasks []table.FileScanTask, day int, t time.Time) bool {
	if len(tasks) == 0 {
		return true
	}
	var days int64
	switch v := tasks[0].File.Partition()[day].(type) {
	case iceberggo.Date:
		days = int64(v)
	case int32:
		days = int64(v)
	default:
		return true
	}
	end := time.Unix((days+1)*86400, 0)
	return !end.After(t)
}

// replaceFiles commits the compaction of a group as a rewrite (snapshot
// operation "replace": no data changed, so streaming readers skip it),
// pinned to the snapshot it checked the group on, re-reading the table
// after each lost race: loads only add files, so the rewrite stays valid
// unless another writer removed one of its files or added deletes to one
// (an engine's DELETE or overwrite): then the group ends with
// errGroupChanged, since committing it would bring back rows that writer
// removed. planned are the group's files as they were read.
func (s *Sink) replaceFiles(ctx context.Context, tbl *table.Table, planned []table.FileScanTask, res table.CompactionGroupResult) error {
	err := s.retryLostRaces(ctx, tbl.Identifier(), func(fresh *table.Table) (*table.Transaction, error) {
		tasks, err := unchangedSince(ctx, fresh, planned)
		if err != nil {
			return nil, err
		}
		r := res
		r.SafePosDeletes = onlyRewritten(tasks, planned, res.SafePosDeletes)
		txn := fresh.NewTransaction()
		// The checks above hold for fresh as read: the commit must land on
		// exactly that snapshot. Pinned, a moved branch fails it and the
		// next attempt checks again, even if someone sets
		// commit.retry.num-retries, with which iceberg-go would replay the
		// rewrite onto the newer table under its own checks instead, and
		// refuse a group whose files went with an error that is no lost
		// race.
		if err := txn.AssertRefSnapshotID(""); err != nil {
			return nil, fmt.Errorf("pin the compaction of %s to its snapshot: %w", name(fresh.Identifier()), err)
		}
		summary := iceberggo.Properties{"tracelake.operation": "compact"}
		if err := txn.NewRewrite(summary).ApplyResult(r).Commit(ctx); err != nil {
			return nil, fmt.Errorf("rewrite %d files as %d: %w", len(res.OldDataFiles), len(res.NewDataFiles), err)
		}
		return txn, nil
	})
	if err != nil && !errors.Is(err, errUnknownOutcome) {
		s.removeFiles(ctx, tbl, res.NewDataFiles)
	}
	return err
}

// errGroupChanged: another writer removed a file a compaction group
// rewrites, or added deletes to one, after the group was read.
var errGroupChanged = errors.New("the group's files changed")

// unchangedSince checks that every planned file is still in the table with
// the same delete files as when it was read, and returns the table's
// files as planned now. The same files, not as many: on a v3 table a
// DELETE replaces a file's deletes by one deletion vector holding them
// all, so a file with one position delete file that a DELETE gave a
// deletion vector still has one delete file, and rows the rewrite read
// as live are deleted now.
func unchangedSince(ctx context.Context, tbl *table.Table, planned []table.FileScanTask) ([]table.FileScanTask, error) {
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the files of %s: %w", name(tbl.Identifier()), err)
	}
	now := make(map[string][]string, len(tasks))
	for _, t := range tasks {
		now[t.File.FilePath()] = deleteKeys(t)
	}
	for _, t := range planned {
		keys, ok := now[t.File.FilePath()]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s is no longer in the table", errGroupChanged, t.File.FilePath())
		case !slices.Equal(keys, deleteKeys(t)):
			return nil, fmt.Errorf("%w: %s has deletes it did not have", errGroupChanged, t.File.FilePath())
		}
	}
	return tasks, nil
}

// deleteKeys names the delete files that apply to t's data file, sorted:
// each by its path, a deletion vector also by its place in its Puffin
// file (one file may hold the vectors of many data files).
func deleteKeys(t table.FileScanTask) []string {
	keys := make([]string, 0, deletesOf(t))
	for _, files := range [][]iceberggo.DataFile{t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles} {
		for _, df := range files {
			key := df.FilePath()
			if off := df.ContentOffset(); off != nil {
				key = fmt.Sprintf("%s@%d", key, *off)
			}
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// onlyRewritten returns those of posDeletes (the position delete files a
// compaction group's rewrite would drop) that apply to no data file of the
// table (tasks, as planned now) outside the group (planned).
// iceberg-go (CollectSafePositionDeletes) drops every position delete file
// attached to a file of the group, and scan planning attaches one to
// every older data file of its partition whatever rows it deletes: one
// that also deletes rows of a file the group leaves (a file at the target
// size, which the planner does not rewrite) would be dropped with the
// group and bring those rows back. Kept, it deletes them still: its rows
// name a file and a position, so it deletes nothing of the new files,
// whose rows the rewrite read with it applied.
func onlyRewritten(tasks, planned []table.FileScanTask, posDeletes []iceberggo.DataFile) []iceberggo.DataFile {
	if len(posDeletes) == 0 {
		return nil
	}
	rewritten := make(map[string]bool, len(planned))
	for _, t := range planned {
		rewritten[t.File.FilePath()] = true
	}
	elsewhere := map[string]bool{} // delete files that apply to a file the group leaves
	for _, t := range tasks {
		if rewritten[t.File.FilePath()] {
			continue
		}
		for _, df := range t.DeleteFiles {
			elsewhere[df.FilePath()] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(posDeletes), func(df iceberggo.DataFile) bool { return elsewhere[df.FilePath()] })
}

func deletesOf(t table.FileScanTask) int {
	return len(t.DeleteFiles) + len(t.EqualityDeleteFiles) + len(t.DeletionVectorFiles)
}

// errUnknownOutcome marks a commit that failed in a way that may have
// committed it after all.
var errUnknownOutcome = errors.New("commit outcome unknown")

// retryLostRaces loads the table, builds a transaction with build and
// commits it (none: build found nothing to do), again from a fresh load
// after each race lost to another writer: a maintenance commit.
func (s *Sink) retryLostRaces(ctx context.Context, id table.Identifier, build func(*table.Table) (*table.Transaction, error)) error {
	_, err := s.commitLostRaces(ctx, "maintenance", id, build)
	return err
}

// commitLostRaces is retryLostRaces of a commit of what (the log names
// it: "maintenance", "abandonment") returning the table as the commit
// left it (nil: nothing committed).
func (s *Sink) commitLostRaces(ctx context.Context, what string, id table.Identifier, build func(*table.Table) (*table.Transaction, error)) (*table.Table, error) {
	for attempt := 1; ; attempt++ {
		tbl, err := s.loadTable(ctx, id)
		if err != nil {
			return nil, err
		}
		txn, err := build(tbl)
		if err != nil || txn == nil { // nil: nothing to commit
			return nil, err
		}
		if s.beforeMaintenanceCommit != nil {
			s.beforeMaintenanceCommit()
		}
		committed, err := txn.Commit(ctx)
		switch {
		case err == nil:
			return committed, nil
		case committed != nil:
			s.warnUndeleted(id, err)
			return committed, nil
		case !LostRace(err):
			return nil, fmt.Errorf("%w: %w", errUnknownOutcome, err)
		case attempt == maintenanceAttempts:
			return nil, fmt.Errorf("lost %d commit races in a row, the last: %w", attempt, err)
		}
		s.log.Info(what+" commit lost a race with another writer; retrying", "table", name(id), "attempt", attempt)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// warnUndeleted logs err, from deleting the files a landed commit freed,
// unless it is only about files already gone: iceberg-go also tries again
// files an earlier expiry deleted, which are no news. What is left is for
// orphan cleanup.
func (s *Sink) warnUndeleted(id table.Identifier, err error) {
	if !onlyNotExist(err) {
		s.log.Warn("committed, but some freed files could not be deleted; tracelake orphans removes them later", "table", name(id), "err", err)
	}
}

// onlyNotExist reports whether err (possibly joined errors) is only about
// files that do not exist.
func onlyNotExist(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyNotExist(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, fs.ErrNotExist)
}

// Expiry reports what expiring one table's snapshots did.
type Expiry struct {
	Table           string
	Expired, Remain int
}

// Expire removes the snapshots older than olderThan beyond the newest
// retainLast, and the files only they referenced. A snapshot's age is
// counted from when a newer one replaced it as the table's current, not
// from its own commit: a table that took no commit for longer than
// olderThan and is then compacted must keep the snapshot it had until
// now. Iceberg's expiry (iceberg-go's Transaction.ExpireSnapshots, as
// Java's ExpireSnapshots) ages a snapshot by its own timestamp, and
// removed it at once together with the files the compaction replaced:
// a reader that loaded the table a moment before (`tracelake serve`
// reloads every few seconds and reads the files of the snapshot it
// loaded) failed on a missing file, and a time-travel query to
// olderThan ago found no snapshot.
func (s *Sink) Expire(ctx context.Context, olderThan time.Duration, retainLast int) ([]Expiry, error) {
	var out []Expiry
	for _, id := range s.tableIDs() {
		var (
			before []int64
			read   *table.Table
		)
		committed, err := s.commitLostRaces(ctx, "maintenance", id, func(tbl *table.Table) (*table.Transaction, error) {
			before, read = snapshotIDs(tbl), tbl
			// Removed, the loads a rollback dropped could no longer be
			// told from the metadata (a rollback to a snapshot whose
			// summary records no position leaves nothing else), and a
			// start would go on from positions ahead of the data.
			if r := findRollback(tbl.Metadata(), tbl.Properties()); !r.accountedFor() {
				return nil, fmt.Errorf("table %s was rolled back past tracelake's loads (%s): nothing expired, so that they stay to be found until the rollback is dealt with "+
					"(the start of tracelake run names how)", name(id), cmp.Or(joinIDs(r.ids()), r.gone))
			}
			txn := tbl.NewTransaction()
			retain := max(retainLast, currentWithin(tbl.Metadata(), time.Now().Add(-olderThan)))
			// The files are deleted here (deleteExpired), not by
			// iceberg-go after the commit: it deletes those of every
			// removed snapshot, also one another engine tagged meanwhile.
			if err := txn.ExpireSnapshots(table.WithOlderThan(olderThan), table.WithRetainLast(retain), table.WithPostCommit(false)); err != nil {
				return nil, fmt.Errorf("expire snapshots: %w", err)
			}
			return txn, nil
		})
		if err == nil && committed != nil {
			err = s.deleteExpired(ctx, read, committed)
		}
		if err != nil {
			return out, fmt.Errorf("expire %s: %w", name(id), err)
		}
		tbl, err := s.loadTable(ctx, id)
		if err != nil {
			return out, err
		}
		after := map[int64]bool{}
		for _, snap := range snapshotIDs(tbl) {
			after[snap] = true
		}
		e := Expiry{Table: name(id), Remain: len(after)}
		for _, snap := range before {
			if !after[snap] {
				e.Expired++
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// deleteExpired deletes the files of the snapshots that the expiry
// committed as committed removed from read (the table as the expiry read
// it), unless the commit also dropped a ref the expiry never read. The
// expiry asserts only the refs it read: Iceberg's requirements cannot
// say "no ref was added", and the catalog applies the removal to its
// current metadata, dropping with a removed snapshot every ref on it. A
// tag or branch another engine (Spark, Trino) put on such a snapshot
// between the read and the commit is so dropped. Its snapshot's files
// are then kept, and the error names the ref and the metadata file that
// still holds it, from which it can be restored; orphan cleanup deletes
// them after its grace period.
func (s *Sink) deleteExpired(ctx context.Context, read, committed *table.Table) error {
	if committed.MetadataLocation() == read.MetadataLocation() {
		return nil // nothing to expire: no commit made
	}
	dropped, prev, err := droppedRefs(ctx, read, committed)
	if err != nil {
		return fmt.Errorf("check the refs the expiry commit dropped: %w", err)
	}
	if len(dropped) > 0 {
		return fmt.Errorf("the expiry commit dropped %s, which another writer created after the expiry read the table, "+
			"with the snapshots it removed: no files deleted, the refs are in %s", strings.Join(dropped, ", "), prev)
	}
	kept := map[int64]bool{}
	for _, snap := range committed.Metadata().Snapshots() {
		kept[snap.SnapshotID] = true
	}
	var expired []int64
	for _, snap := range read.Metadata().Snapshots() {
		if !kept[snap.SnapshotID] {
			expired = append(expired, snap.SnapshotID)
		}
	}
	if len(expired) == 0 {
		return nil
	}
	// iceberg-go's own deletion, run on the checked outcome: it deletes
	// the files of the expired snapshots that no snapshot committed
	// still references.
	if err := table.NewRemoveSnapshotsUpdate(expired, true).PostCommit(ctx, read, committed); err != nil {
		s.warnUndeleted(committed.Identifier(), err)
	}
	return nil
}

// droppedRefs lists (as "name (snapshot id)") the refs of the metadata
// the commit of committed was applied to (prev, the last entry of its
// metadata log) that committed lacks or moved and that read did not
// hold as they were: refs the commit dropped that its author never saw.
func droppedRefs(ctx context.Context, read, committed *table.Table) (dropped []string, prev string, err error) {
	for entry := range committed.Metadata().PreviousFiles() {
		prev = entry.MetadataFile
	}
	if prev == "" || prev == read.MetadataLocation() {
		return nil, prev, nil // applied to what the expiry read
	}
	base, err := table.NewFromLocation(ctx, committed.Identifier(), prev, committed.FS, nil)
	if err != nil {
		return nil, prev, fmt.Errorf("read the metadata the commit was applied to, %s: %w", prev, err)
	}
	readRefs := maps.Collect(read.Metadata().Refs())
	after := maps.Collect(committed.Metadata().Refs())
	for refName, ref := range base.Metadata().Refs() {
		if now, ok := after[refName]; ok && now.SnapshotID == ref.SnapshotID {
			continue
		}
		if was, ok := readRefs[refName]; ok && was.SnapshotID == ref.SnapshotID {
			continue // the expiry saw it: removed by its max-ref-age
		}
		dropped = append(dropped, fmt.Sprintf("%s %q (snapshot %d)", ref.SnapshotRefType, refName, ref.SnapshotID))
	}
	slices.Sort(dropped)
	return dropped, prev, nil
}

// currentWithin counts the snapshots of the current branch, newest
// first, that were the table's current snapshot at some moment after
// cutoff: the current one, and each whose successor was committed after
// cutoff. Retaining that many of the newest keeps them all (ExpireSnapshots
// keeps the newest N of the branch whatever their age).
func currentWithin(meta table.Metadata, cutoff time.Time) int {
	cur := meta.CurrentSnapshot()
	if cur == nil {
		return 0
	}
	n := 0
	for _, snap := range table.AncestorsOf(cur.SnapshotID, meta.SnapshotByID) {
		n++
		// snap replaced its parent as current at its own commit.
		if !time.UnixMilli(snap.TimestampMs).After(cutoff) {
			break
		}
	}
	return n
}

func snapshotIDs(tbl *table.Table) []int64 {
	var ids []int64
	for _, snap := range tbl.Metadata().Snapshots() {
		ids = append(ids, snap.SnapshotID)
	}
	return ids
}

// MinOrphanAge is the shortest grace period orphan cleanup accepts: a
// younger unreferenced file may belong to a load that is committing now.
const MinOrphanAge = time.Hour

// Orphans reports the unreferenced files found under one table.
type Orphans struct {
	Table   string
	Files   []string
	Bytes   int64
	Deleted int
	// Staged are the unreferenced files past the grace period that a
	// running process's lease lists: staged, waiting for their commit.
	// They are kept.
	Staged []string
}

// RemoveOrphans deletes the files under each table's location that no
// snapshot references and that are older than grace: files of commits that
// failed with an unknown outcome, of crashed writers, of snapshots expired
// without cleanup. Files that a running process staged and lists in its
// lease (lease.go) are kept, however old. With dryRun it only lists them.
func (s *Sink) RemoveOrphans(ctx context.Context, grace time.Duration, dryRun bool) ([]Orphans, error) {
	if grace < MinOrphanAge {
		return nil, fmt.Errorf("orphan grace period %s is shorter than %s: a younger file may belong to a load committing right now", grace, MinOrphanAge)
	}
	var out []Orphans
	for _, id := range s.tableIDs() {
		o, err := s.removeOrphans(ctx, id, grace, dryRun)
		if err != nil {
			return out, fmt.Errorf("orphan cleanup of %s: %w", name(id), err)
		}
		out = append(out, o)
	}
	return out, nil
}

func (s *Sink) removeOrphans(ctx context.Context, id table.Identifier, grace time.Duration, dryRun bool) (Orphans, error) {
	o := Orphans{Table: name(id)}
	tbl, err := s.loadTable(ctx, id)
	if err != nil {
		return o, err
	}
	staged, err := s.readLeases(ctx, tbl, dryRun)
	if err != nil {
		return o, err
	}
	// The table is read again after the leases: a file a lease no longer
	// lists was committed (or discarded) before that lease was written, so
	// a table read after the lease references it. Read before, it could
	// miss that commit and take the file for an orphan.
	if tbl, err = s.loadTable(ctx, id); err != nil {
		return o, err
	}
	plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(grace))
	if err != nil {
		return o, err
	}
	for _, f := range plan.OrphanFiles() {
		if staged[fileKey(f.Path)] {
			o.Staged = append(o.Staged, f.Path)
			continue
		}
		o.Files = append(o.Files, f.Path)
		o.Bytes += f.SizeBytes
	}
	if dryRun || len(o.Files) == 0 {
		return o, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return o, err
	}
	o.Deleted, err = deletePaths(ctx, fsys, o.Files)
	return o, err
}

// deletePaths deletes files (in batches where the store can), a file
// already gone counting as deleted, and returns how many it deleted.
func deletePaths(ctx context.Context, fsys icebergio.IO, paths []string) (int, error) {
	if bulk, ok := fsys.(icebergio.BulkRemovableIO); ok {
		deleted, err := bulk.DeleteFiles(ctx, paths)
		return len(deleted), err
	}
	n := 0
	var errs []error
	for _, p := range paths {
		if err := removeFile(fsys, p); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", p, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
