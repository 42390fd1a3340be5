package iceberg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	iceberggo "github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// staged is a batch written as data files of its tables, waiting for the
// commits that add them.
type staged struct {
	ranges            []sink.Range
	raw, dlq, derived stagedFiles
	at                time.Time // when staged (checkStaged)
	// names are the batches staged in it: one, or a stream's batches
	// written into its open writers (open.go).
	names []string
	// batches are the rows of each batch of a stream's entry, as staged,
	// for the load of a batch committed with an earlier load to report
	// them (earlyRows).
	batches map[string]*earlyRows
	// open are the open writers, until closed (under Sink.mu); kept,
	// closed, when a write failed, for the load to fail on.
	open *openEntry
	// abandoned: the main table's positions fenced some of the entry's
	// positions of an OTLP receivers' sequence, as abandoned (Abandon, by
	// another process between this load's commits: what its earlier
	// commits stored in the other tables there is deleted) or as another
	// process's load (two on one otlp.instance). None of its dead letters
	// count as stored then: they are counted by partition, not by
	// position, and the OTLP loader takes what a fenced load stored for
	// its last requests' rows (directload's fencedBefore), so a dead
	// letter of an earlier position, deleted or not, would stand for a
	// later request's span that was fenced, and that request be
	// acknowledged. Counted as not stored, the requests are refused and
	// their clients send them again (at worst a dead letter twice).
	abandoned bool
	// doubt is what the entry's load decided of the offsets a killed
	// load left in doubt (indoubt.go), once read.
	doubt *inDoubt
}

// earlyRows are a batch's rows per partition in the main and dead-letter
// tables. Of a batch committed with an earlier load, they are reported by
// its own load, the one that committed them not counting them.
type earlyRows struct {
	loadID    string // the load that committed them
	rows, dlq map[sink.TopicPartition]int64
}

// kind is one of a load's tables.
type kind int

const (
	mainTable    kind = iota // the raw or declared table: its positions are the ledger
	dlqTable                 // the dead-letter table
	derivedTable             // rows derived from the main table's (genai_operations)
)

// kinds are the tables a load commits, in order: the main table last, so
// that its positions (what Positions reports) never run ahead of the
// other tables' rows; each table is fenced by its own positions.
func (s *Sink) kinds() []kind {
	if s.opt.Derived != nil {
		return []kind{dlqTable, derivedTable, mainTable}
	}
	return []kind{dlqTable, mainTable}
}

// stagedFiles are a staged batch's data files of one table.
type stagedFiles struct {
	files []iceberggo.DataFile
	// creating are the files open writers created, complete or not:
	// leased, and deleted with the rest if never committed.
	creating []string
	counts   map[sink.TopicPartition]int64 // rows per partition
	// referenced: a commit that landed, or may have (its outcome is
	// unknown), references the files, so they are never deleted here.
	referenced bool
	// landed: a commit of this load's that landed added the files (and
	// counts) to their table, and a later table's commit failed. The
	// load tried again finds its positions covering them, and they are
	// its rows, not another load's: counted as stored, not fenced.
	landed bool
	// tried are the load ids of this table's commits that held the files
	// (or moved their positions) and failed with an unknown outcome (a
	// lost reply): one found among the table's snapshots landed, and the
	// files are its rows, as landed ones are.
	tried []string
}

func (st *staged) of(k kind) *stagedFiles {
	switch k {
	case dlqTable:
		return &st.dlq
	case derivedTable:
		return &st.derived
	}
	return &st.raw
}

// StagesRecords makes the sink a sink.RecordStager: raw rows come as
// records and become Arrow columns without a detour through NDJSON.
func (s *Sink) StagesRecords() {}

// StagesToFiles makes the sink a sink.FileStager: Stage writes the batch's
// data files, so the batch holds no memory while it waits for its commit.
func (s *Sink) StagesToFiles() {}

// Stage writes the batch's raw and dead-letter rows as data files of the
// two tables (Parquet, in the tables' locations) without fencing them: the
// commit that adds them leaves out what the positions then cover. Files
// of a batch never committed are deleted by Discard, or, after a crash, by
// `tracelake orphans`.
func (s *Sink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	if len(b.Rows) > 0 && s.opt.Typed == nil {
		return sink.File{}, errors.New("the iceberg sink takes raw rows as records, not NDJSON rows")
	}
	if len(b.Derived) > 0 && s.opt.Derived == nil {
		return sink.File{}, sink.ErrNoDerivedTable
	}
	f := sink.File{Name: b.Name(), Ranges: b.Ranges, MaxLine: b.MaxLine}
	s.startLeases()
	s.mu.Lock()
	st, ok := s.kept[f.Name]
	s.mu.Unlock()
	switch {
	case ok && b.Stream != "":
		return f, nil // its bytes are in files shared with other batches
	case b.Stream != "":
		if err := s.stageOpen(ctx, b, &f); err != nil {
			s.sealStream(b.Stream)
			return sink.File{}, err
		}
		return f, nil
	case !ok:
		st = &staged{ranges: b.Ranges, at: time.Now(), names: []string{f.Name}}
		for _, k := range s.kinds() {
			if err := s.stageTable(ctx, b, k, st.of(k)); err != nil {
				s.drop(ctx, st)
				return sink.File{}, err
			}
		}
		s.mu.Lock()
		s.kept[f.Name] = st
		s.mu.Unlock()
	}
	// Staged now, or before (a stage retried): its files.
	for _, df := range slices.Concat(st.raw.files, st.dlq.files, st.derived.files) {
		f.Bytes += df.FileSizeBytes()
	}
	return f, nil
}

// stageTable writes b's rows of one table as data files into out.
func (s *Sink) stageTable(ctx context.Context, b *sink.Batch, k kind, out *stagedFiles) error {
	tbl, sc, err := s.tableSchema(ctx, k)
	if err != nil {
		return err
	}
	out.counts = map[sink.TopicPartition]int64{}
	rec, err := s.buildRecord(sc, b, k, out.counts)
	if err != nil {
		return err
	}
	if rec == nil {
		return nil
	}
	out.files, err = s.writeFiles(ctx, tbl, sc, func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
	return err
}

// writeFiles writes recs as data files of tbl. The data files are
// written here rather than by txn.Append, so that files never committed
// are ours to delete.
func (s *Sink) writeFiles(ctx context.Context, tbl *table.Table, sc *arrow.Schema, recs iter.Seq2[arrow.RecordBatch, error]) ([]iceberggo.DataFile, error) {
	var written []iceberggo.DataFile
	var given int64
	counted := func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range recs {
			if rec != nil {
				given += rec.NumRows() // before WriteRecords releases it
			}
			if !yield(rec, err) {
				return
			}
		}
	}
	for df, err := range table.WriteRecords(ctx, writeView(tbl), sc, counted) {
		if err != nil {
			s.removeFiles(ctx, tbl, written)
			return nil, fmt.Errorf("write data files of %s: %w", name(tbl.Identifier()), err)
		}
		written = append(written, df)
	}
	if err := wroteAll(written, given); err != nil {
		s.removeFiles(ctx, tbl, written)
		return nil, fmt.Errorf("write data files of %s: %w", name(tbl.Identifier()), err)
	}
	return written, nil
}

// tableSchema is table k as last read and the Arrow schema of its rows.
func (s *Sink) tableSchema(ctx context.Context, k kind) (*table.Table, *arrow.Schema, error) {
	tbl, err := s.table(ctx, s.id(k))
	if err != nil {
		return nil, nil, err
	}
	sc, err := arrowSchema(tbl, s.schemaOf(k))
	if err != nil {
		return nil, nil, err
	}
	return tbl, sc, nil
}

// schemaOf is the schema of one of the tables.
func (s *Sink) schemaOf(k kind) *iceberggo.Schema {
	switch k {
	case dlqTable:
		return dlqSchema
	case derivedTable:
		return s.derivedSchema
	}
	return s.mainSchema()
}

func (s *Sink) id(k kind) table.Identifier {
	switch k {
	case dlqTable:
		return s.dlq
	case derivedTable:
		return s.derived
	}
	return s.raw
}

// table is the table as last read, read now if it never was. Staging
// writes with it: a table's location, schema and partition spec change
// rarely, and every commit reads the table again.
func (s *Sink) table(ctx context.Context, id table.Identifier) (*table.Table, error) {
	s.mu.Lock()
	tbl := s.tables[name(id)]
	s.mu.Unlock()
	if tbl != nil {
		return tbl, nil
	}
	tbl, err := s.loadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	s.remember(tbl)
	return tbl, nil
}

func (s *Sink) remember(tbl *table.Table) {
	s.mu.Lock()
	s.tables[name(tbl.Identifier())] = tbl
	s.mu.Unlock()
}

// Discard deletes the data files of staged batches that will not be
// loaded.
func (s *Sink) Discard(files []sink.File) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range files {
		s.mu.Lock()
		delete(s.committedEarly, f.Name)
		st := s.kept[f.Name]
		var e *openEntry
		if st != nil {
			// Its entry goes whole: the batches written with it are
			// in its files.
			for _, n := range st.names {
				delete(s.kept, n)
			}
			e = st.open
		}
		s.mu.Unlock()
		switch {
		case e != nil:
			s.abortEntry(ctx, e) // a batch written while it closed goes too: its load fails, not staged
		case st != nil:
			s.drop(ctx, st)
		}
	}
}

// drop deletes a staged batch's files that no commit references.
func (s *Sink) drop(ctx context.Context, st *staged) {
	for _, k := range s.kinds() {
		s.dropFiles(ctx, k, st.of(k))
	}
	if st.doubt != nil {
		s.dropFiles(ctx, dlqTable, &st.doubt.late)
	}
}

func (s *Sink) dropFiles(ctx context.Context, k kind, sf *stagedFiles) {
	s.mu.Lock()
	files, creating := sf.files, sf.creating
	sf.creating = nil
	s.mu.Unlock()
	if !sf.referenced && len(files)+len(creating) > 0 {
		if tbl, err := s.table(ctx, s.id(k)); err == nil {
			s.removeFiles(ctx, tbl, files)
			s.removePaths(ctx, tbl, unfinished(files, creating))
		}
	}
	s.setFiles(sf, nil, nil)
}

// unfinished are the paths of creating that are not among files: those of
// writers that failed.
func unfinished(files []iceberggo.DataFile, creating []string) []string {
	done := map[string]bool{}
	for _, df := range files {
		done[df.FilePath()] = true
	}
	return slices.DeleteFunc(slices.Clone(creating), func(p string) bool { return done[p] })
}

// loadRequest is one Load waiting for the commit of its group.
type loadRequest struct {
	files []sink.File
	done  chan loadResult
}

// loadResult is a load's outcome, or, with lead, the request to commit
// the next group.
type loadResult struct {
	loaded sink.Loaded
	err    error
	lead   bool
}

// Load commits the files' dead-letter rows, then their raw rows with the
// positions (see the package comment). Loads that arrive while another is
// gathering or committing are committed together, in one snapshot per
// table: the first to arrive leads, waits GroupWait for the others, and
// commits the group; a load arriving during the commit leads the next
// group.
func (s *Sink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	if len(files) == 0 {
		return sink.Loaded{}, nil
	}
	req := &loadRequest{files: files, done: make(chan loadResult, 1)}
	g := &s.group
	g.Lock()
	g.queue = append(g.queue, req)
	lead := !g.leading
	g.leading = true
	g.Unlock()
	if !lead {
		// The leader always answers: it commits with its own context,
		// and a failure fails the whole group, which the pipeline
		// retries load by load.
		if r := <-req.done; !r.lead {
			return r.loaded, r.err
		}
	}
	if s.opt.GroupWait > 0 {
		select {
		case <-time.After(s.opt.GroupWait):
		case <-ctx.Done():
		}
	}
	g.Lock()
	group := g.queue
	g.queue = nil
	g.Unlock()
	results := s.commitGroup(ctx, group)
	var own loadResult
	for i, r := range group {
		if r == req {
			own = results[i]
		} else {
			r.done <- results[i]
		}
	}
	g.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- loadResult{lead: true}
	} else {
		g.leading = false
	}
	g.Unlock()
	return own.loaded, own.err
}

// commitGroup commits the staged batches of a group of loads: the
// dead-letter table's commit, the derived table's, then the main table's.
// A load naming a batch not staged here fails alone.
func (s *Sink) commitGroup(ctx context.Context, group []*loadRequest) []loadResult {
	results := make([]loadResult, len(group))
	var entries []*staged
	owner := []int{} // owner[i]: the group member entries[i] belongs to
	s.mu.Lock()
	for i, req := range group {
		var mine []*staged
		for _, f := range req.files {
			st := s.kept[f.Name]
			switch {
			case st == nil && s.committedEarly[f.Name] != nil:
				continue // its rows and positions are in
			case st == nil:
				results[i].err = fmt.Errorf("batch %s was not staged in this process", f.Name)
			case !slices.Contains(mine, st) && !slices.Contains(entries, st):
				mine = append(mine, st) // a stream's entry holds several of the files
			}
			if results[i].err != nil {
				break
			}
		}
		if results[i].err == nil {
			entries = append(entries, mine...)
			for range mine {
				owner = append(owner, i)
			}
		}
	}
	s.mu.Unlock()
	if len(entries) == 0 {
		// Nothing to commit: the batches named were committed with an
		// earlier load (or none was staged), and are forgotten.
		s.reportEarly(group, results)
		return results
	}
	// From here no batch is written into the entries: a batch written
	// into one before is committed with it.
	if err := s.closeAll(ctx, entries); err != nil {
		for i := range results {
			results[i].err = cmp.Or(results[i].err, err)
		}
		return results
	}
	if err := s.checkStaged(ctx, entries); err != nil {
		for i := range results {
			results[i].err = cmp.Or(results[i].err, err)
		}
		return results
	}
	// The same for every attempt of the same staged batches: a commit
	// whose reply was lost is found by it (commitTable).
	var names []string
	for _, st := range entries {
		names = append(names, st.names...)
	}
	loadID := sink.IdentityOf(names)
	counts := map[kind][]map[sink.TopicPartition]int64{}
	fenced := map[kind][]bool{}
	landed := false // a table's commit of this group landed
	main := &mainPositions{}
	for _, k := range s.kinds() {
		c, f, ok, err := s.commitTable(ctx, entries, k, loadID, main)
		// Once a table's commit landed, a later one that loses a race is
		// tried again at once, fenced by the positions read again: failed,
		// the load would leave the tables committed first ahead of the
		// main table, whose rows a retry of other records at the same
		// positions (the OTLP receivers' sequence) could not add.
		for race := 1; err != nil && landed && LostRace(err) && race < maxRacesInALoad; race++ {
			s.log.Info("a load's commit lost a race after another table's landed; committing it again", "table", name(s.id(k)), "race", race)
			c, f, ok, err = s.commitTable(ctx, entries, k, loadID, main)
		}
		landed = landed || ok
		if err != nil {
			for i, req := range group {
				if results[i].err == nil {
					results[i].err = fmt.Errorf("load %d files into %s: %w", len(req.files), name(s.id(k)), err)
				}
			}
			return results
		}
		counts[k], fenced[k] = c, f
	}
	// The derived rows a killed load left at this load's dead letters
	// (or a stopped one's: marked), then the dead letters of offsets in
	// doubt that no table holds: only now that the main table's commit
	// made the range this load's.
	if err := s.finishDeadDerivedOf(ctx, entries); err != nil {
		for i := range results {
			results[i].err = cmp.Or(results[i].err, err)
		}
		return results
	}
	late, err := s.commitLate(ctx, entries, loadID)
	for race := 1; err != nil && LostRace(err) && race < maxRacesInALoad; race++ {
		s.log.Info("a load's commit of dead letters in doubt lost a race; committing it again", "race", race)
		late, err = s.commitLate(ctx, entries, loadID)
	}
	if err != nil {
		for i, req := range group {
			if results[i].err == nil {
				results[i].err = fmt.Errorf("load %d files' dead letters in doubt into %s: %w", len(req.files), name(s.dlq), err)
			}
		}
		return results
	}
	for e, st := range entries {
		r := &results[owner[e]]
		r.loaded.LoadID = loadID
		for _, rg := range st.ranges {
			dlq := counts[dlqTable][e][rg.TopicPartition] + late[e][rg.TopicPartition]
			if st.abandoned {
				dlq = 0
			}
			addLoaded(&r.loaded, rg, counts[mainTable][e][rg.TopicPartition], dlq)
		}
	}
	s.reportEarly(group, results)
	// Committed: forgotten, and their files now belong to the tables. A
	// member that failed alone keeps its staged batches, for its retry or
	// its Discard. A batch committed early is reported by its own load:
	// its rows as staged, unless the positions fenced its entry (then
	// this load's count has what is left of them).
	s.mu.Lock()
	for e, st := range entries {
		if results[owner[e]].err != nil {
			continue
		}
		r := &results[owner[e]]
		for _, n := range st.names {
			if s.kept[n] != st {
				continue
			}
			delete(s.kept, n)
			if slices.ContainsFunc(group[owner[e]].files, func(f sink.File) bool { return f.Name == n }) {
				continue
			}
			early := &earlyRows{loadID: loadID}
			if b := st.batches[n]; b != nil {
				if !fenced[mainTable][e] {
					early.rows = b.rows
				}
				if !fenced[dlqTable][e] {
					early.dlq = b.dlq
				}
			}
			for i := range r.loaded.Ranges {
				x := &r.loaded.Ranges[i]
				x.Records -= early.rows[x.TopicPartition]
				x.DLQ -= early.dlq[x.TopicPartition]
			}
			s.committedEarly[n] = early
		}
	}
	s.mu.Unlock()
	return results
}

// reportEarly adds to the loads of group that succeeded the rows of
// their batches committed with an earlier load, and forgets the batches:
// their own load found them loaded.
func (s *Sink) reportEarly(group []*loadRequest, results []loadResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, req := range group {
		if results[i].err != nil {
			continue
		}
		r := &results[i]
		for _, f := range req.files {
			early := s.committedEarly[f.Name]
			if early == nil {
				continue
			}
			delete(s.committedEarly, f.Name)
			r.loaded.LoadID = cmp.Or(r.loaded.LoadID, early.loadID)
			for _, rg := range f.Ranges {
				addLoaded(&r.loaded, rg, early.rows[rg.TopicPartition], early.dlq[rg.TopicPartition])
			}
		}
	}
}

// addLoaded adds rg's offsets, rows and dead letters to l's range of its
// partition.
func addLoaded(l *sink.Loaded, rg sink.Range, rows, dlq int64) {
	l.Ranges = addRange(l.Ranges, rg, rows, dlq)
}

// addRange widens the range of rg's partition in ranges (one per
// partition) to rg's offsets and adds rows and dead letters to it.
func addRange(ranges []sink.Range, rg sink.Range, rows, dlq int64) []sink.Range {
	i := slices.IndexFunc(ranges, func(x sink.Range) bool { return x.TopicPartition == rg.TopicPartition })
	if i < 0 {
		ranges = append(ranges, sink.Range{TopicPartition: rg.TopicPartition, First: rg.First, Last: rg.Last, TopicID: rg.TopicID})
		i = len(ranges) - 1
	}
	x := &ranges[i]
	if x.TopicID == "" {
		x.TopicID = rg.TopicID
	}
	x.First, x.Last = min(x.First, rg.First), max(x.Last, rg.Last)
	x.Records += rows
	x.DLQ += dlq
	return ranges
}

// maxRacesInALoad bounds the commits of one table in one load that lose a
// race once another table of the load committed (see commitGroup): each
// lost race is another writer's commit landing, so more than a few in a
// row means something commits without pause, and the load fails rather
// than spin.
const maxRacesInALoad = 8

// coverage is how much of a staged batch a table's positions cover.
type coverage int

const (
	coversNone coverage = iota
	coversPart
	coversAll
)

func covered(ranges []sink.Range, pos map[sink.TopicPartition]int64) coverage {
	var some, all = false, true
	for _, r := range ranges {
		next, ok := pos[r.TopicPartition]
		some = some || (ok && next > r.First)
		all = all && ok && next > r.Last
	}
	switch {
	case all:
		return coversAll
	case some:
		return coversPart
	}
	return coversNone
}

// commitTable adds the staged files of entries to one table, past its
// positions, with the advanced positions, in one commit; it returns the
// rows added per entry and partition, which entries the positions fenced
// (in part or whole), and whether a commit landed. The main table's
// positions advance even when it gets no row (a load of dead letters
// only).
//
// Under the process's commit lock the table is read again and each entry
// fenced by the positions as they stand, advanced by the entries before
// it (a partition that moved between workers can be in two entries): an
// entry the positions do not reach goes in as staged, one they cover is
// left out, one they cover in part has its files written again without
// the covered rows.
func (s *Sink) commitTable(ctx context.Context, entries []*staged, k kind, loadID string, main *mainPositions) ([]map[sink.TopicPartition]int64, []bool, bool, error) {
	if s.beforeLoadCommit != nil {
		s.beforeLoadCommit()
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	id := s.id(k)
	fresh, err := s.loadTable(ctx, id)
	if err != nil {
		return nil, nil, false, err
	}
	// Before anything of the load is committed: a table rolled back
	// under this process has positions ahead of its data.
	if err := s.checkBranch(fresh); err != nil {
		return nil, nil, false, err
	}
	s.remember(fresh)
	start, err := positions(fresh)
	if err != nil {
		return nil, nil, false, err
	}
	switch k {
	case dlqTable:
		if err := s.settleDoubt(ctx, fresh, start, entries, main); err != nil {
			return nil, nil, false, err
		}
	case derivedTable:
		if err := s.derivedAhead(ctx, fresh, start, entries, main); err != nil {
			return nil, nil, false, err
		}
	}
	next := maps.Clone(start)
	if k != mainTable && slices.ContainsFunc(entries, func(st *staged) bool { return len(st.of(k).files) > 0 }) {
		if err := s.fenceByMain(ctx, k, entries, next, main); err != nil {
			return nil, nil, false, err
		}
	}
	counts := make([]map[sink.TopicPartition]int64, len(entries))
	fenced := make([]bool, len(entries))
	var add []iceberggo.DataFile
	in := make([]bool, len(entries)) // entries this commit adds or moves the positions of
	for i, st := range entries {
		sf := st.of(k)
		cov := covered(st.ranges, next)
		fenced[i] = cov != coversNone
		// The offsets in doubt already in the dead-letter table stay
		// dead letters only: this table takes no row of them.
		decided := k != dlqTable && st.doubt.decides(st.ranges) && len(sf.files) > 0
		if k == mainTable && cov != coversAll && st.doubt != nil {
			// Landed, this commit makes the range past the positions
			// as they stand (advanced by the entries before) this
			// load's.
			st.doubt.own(maps.Clone(next))
		}
		switch {
		case cov == coversAll && (sf.landed || committedBy(fresh, sf.tried) || movedBy(fresh, st.ranges, sf.tried)):
			// Committed by this load's earlier attempt (a later table's
			// commit failed, or this one's reply was lost): its rows
			// are in, and counted, else the load reports them fenced
			// and the OTLP receivers tell their clients to send them
			// again (directload's fencedError).
			fenced[i] = false
			counts[i] = sf.counts
			continue
		case cov == coversAll:
			s.dropFiles(ctx, k, sf)
			st.abandoned = k == mainTable && fencedSequence(fresh.Properties(), st.ranges)
			if k == mainTable {
				st.doubt.own(nil) // another load's commit took the range
			}
		case cov == coversPart || decided:
			if cov == coversPart {
				st.abandoned = k == mainTable && fencedSequence(fresh.Properties(), st.ranges)
			}
			past := pastPositions(next)
			keep := func(tp sink.TopicPartition, o int64) bool { return past(tp, o) && !st.doubt.decided(tp, o) }
			files, cnt, err := s.refence(ctx, fresh, sf.files, k, keep)
			if err != nil {
				return nil, nil, false, err
			}
			fenced[i] = fenced[i] || !maps.Equal(cnt, sf.counts)
			s.dropFiles(ctx, k, sf)
			s.setFiles(sf, files, cnt)
		}
		counts[i] = sf.counts
		add = append(add, sf.files...)
		in[i] = cov != coversAll
		for _, r := range st.ranges {
			next[r.TopicPartition] = max(next[r.TopicPartition], r.Last+1)
		}
	}
	marks, unmark, recovering := s.recoveryCommit(k, fresh, start, next)
	if len(add) == 0 && !recovering && (k != mainTable || maps.Equal(next, start)) {
		// No row to add, and the dead-letter or derived table's fence
		// stays, or the main table's positions are already there (a
		// repeated load).
		return counts, fenced, false, nil
	}
	txn, summary, err := beginPositionsCommit(fresh, start, next, loadID)
	if err != nil {
		return nil, nil, false, err
	}
	if k == mainTable {
		// The ids beside the positions the assignment checks.
		var moved []sink.Range
		for i, st := range entries {
			if in[i] {
				moved = append(moved, st.ranges...)
			}
		}
		if err := setTopicIDs(txn, fresh.Properties(), summary, moved); err != nil {
			return nil, nil, false, err
		}
		dead, err := s.deadDerivedMarks(ctx, fresh.Properties(), entries)
		if err != nil {
			return nil, nil, false, err
		}
		if len(dead) > 0 {
			if err := txn.SetProperties(dead); err != nil {
				return nil, nil, false, err
			}
		}
	}
	if err := markRecovery(txn, marks, unmark); err != nil {
		return nil, nil, false, err
	}
	if err := s.acceptRollbacks(txn, fresh); err != nil {
		return nil, nil, false, err
	}
	if err := addFiles(ctx, txn, fresh, s.schemaOf(k), add, summary); err != nil {
		return nil, nil, false, err
	}
	if s.beforeCatalogCommit != nil {
		s.beforeCatalogCommit(name(id))
	}
	began := time.Now()
	committed, err := txn.Commit(ctx)
	if err != nil && !LostRace(err) {
		// A lost reply (a gateway's 503, a connection reset): the commit
		// landed or not, and the table tells. Landed, the load goes on as
		// committed. Left unknown, a load whose last attempt landed
		// failed with its rows stored: the OTLP receivers answered its
		// requests 503 (no attempt came after it to find the commit) and
		// their clients' retries stored them twice.
		if tbl := s.landedAfterAll(ctx, id, loadID, err); tbl != nil {
			committed, err = tbl, nil
		}
	}
	s.reportCommit(ctx, id, time.Since(began), committed, err)
	if err == nil || !LostRace(err) {
		// Landed, or may have: the files are the table's now (orphan
		// cleanup judges them if the commit did not land).
		for _, st := range entries {
			st.of(k).referenced = true
		}
	}
	if err == nil {
		for _, st := range entries {
			// Those whose files this commit added (a fenced entry's
			// are dropped).
			if len(st.of(k).files) > 0 {
				st.of(k).landed = true
			}
		}
	}
	if err != nil && !LostRace(err) {
		// It may have landed: the retry looks for it among the table's
		// snapshots before it takes the positions for another load's.
		for i, st := range entries {
			if in[i] {
				st.of(k).tried = append(st.of(k).tried, loadID)
			}
		}
	}
	if err != nil {
		// Another writer committed first (or the catalog failed): the
		// pipeline retries, and the retry fences the same staged files
		// by the positions read again.
		if !LostRace(err) && len(add) > 0 {
			s.log.Warn("iceberg commit failed with an unknown outcome; its data files are kept (tracelake orphans removes them if unreferenced)",
				"table", name(id), "files", len(add), "err", err)
		}
		return nil, nil, false, fmt.Errorf("commit: %w", err)
	}
	s.committedBranch(committed)
	s.remember(committed)
	s.recovered(k, next)
	return counts, fenced, true, nil
}

// fencedSequence reports, for an entry the main table's positions fence,
// whether its dead letters must not count as stored (staged.abandoned):
// it holds positions of an OTLP receivers' sequence, or abandoned ones.
func fencedSequence(props iceberggo.Properties, ranges []sink.Range) bool {
	return abandonedAny(props, ranges) || slices.ContainsFunc(ranges, func(r sink.Range) bool {
		return strings.HasPrefix(r.Topic, sink.SequenceTopicPrefix)
	})
}

// abandonedAny reports whether a position of ranges is among the
// abandoned ones props (the main table's) list. An unreadable list counts
// as one: what is counted as stored then is only the main table's rows.
func abandonedAny(props iceberggo.Properties, ranges []sink.Range) bool {
	for _, r := range ranges {
		key := runsKey(abandonedKeyPrefix, r.TopicPartition)
		runs, err := parseRuns(key, props[key])
		if err != nil || slices.ContainsFunc(runs, func(a sink.Run) bool { return a.First <= r.Last && r.First <= a.Last }) {
			return true
		}
	}
	return false
}

// fenceByMain raises next, the positions a dead-letter or derived table's
// commit fences entries by, to the main table's where those are further,
// for the partitions of entries. The main table commits last, so its
// positions cover a record only once every table of some load has it:
// a table whose own positions lag (a load with no dead letter adds no
// commit to the dead-letter table) would otherwise take rows at positions
// another process's load holds — where two loaders share one
// otlp.instance, rows of other requests — while the main table fenced
// them out, and the load's count of what it stored would no longer be
// the rows of its last requests (directload's fencedBefore). Not for a
// partition table k reads again after a rollback of its own
// (startRecovery): its positions were set back to its data, and the
// main table's cover rows k lacks.
func (s *Sink) fenceByMain(ctx context.Context, k kind, entries []*staged, next map[sink.TopicPartition]int64, main *mainPositions) error {
	pos, err := main.get(ctx, s)
	if err != nil {
		return err
	}
	for _, st := range entries {
		for _, r := range st.ranges {
			if n, ok := pos[r.TopicPartition]; ok && n > next[r.TopicPartition] && !s.recoveringOf(k, r.TopicPartition) {
				next[r.TopicPartition] = n
			}
		}
	}
	return nil
}

// mainPositions are the main table's positions as read for one load's
// commits of its other tables: once, by the first that needs them, not a
// catalog read per table. Read again for the second table, they could be
// further only where another process's main commit landed between this
// load's commits: the race README names for loaders sharing an
// otlp.instance, which a second read would narrow, not close.
type mainPositions struct {
	pos map[sink.TopicPartition]int64
}

func (m *mainPositions) get(ctx context.Context, s *Sink) (map[sink.TopicPartition]int64, error) {
	if m.pos != nil {
		return m.pos, nil
	}
	tbl, err := s.loadTable(ctx, s.id(mainTable))
	if err != nil {
		return nil, err
	}
	// Checked here too, not only at the main table's own commit: the
	// other tables commit first.
	if err := s.checkBranch(tbl); err != nil {
		return nil, err
	}
	if m.pos, err = positions(tbl); err != nil {
		return nil, err
	}
	return m.pos, nil
}

// landedAfterAll reads table id again after its commit of loadID failed
// with commitErr, an unknown outcome: the table as that commit left it if
// a snapshot of loadID's is on its branch (no earlier commit of loadID's
// is: commitTable commits nothing for a load it finds committed), nil if
// none is or the table cannot be read.
func (s *Sink) landedAfterAll(ctx context.Context, id table.Identifier, loadID string, commitErr error) *table.Table {
	tbl, err := s.loadTable(ctx, id)
	if err != nil || !committedBy(tbl, []string{loadID}) {
		return nil
	}
	s.log.Info("an iceberg commit answered an error and landed all the same: its reply was lost; the load goes on as committed",
		"table", name(id), "load_id", loadID, "err", commitErr)
	return tbl
}

// committedBy reports whether a snapshot of tbl's current branch is a
// commit of one of the loads ids names (tracelake.load-id).
func committedBy(tbl *table.Table, ids []string) bool {
	meta := tbl.Metadata()
	cur := meta.CurrentSnapshot()
	if len(ids) == 0 || cur == nil {
		return false
	}
	for _, snap := range table.AncestorsOf(cur.SnapshotID, meta.SnapshotByID) {
		if snap.Summary != nil && slices.Contains(ids, snap.Summary.Properties[loadIDKey]) {
			return true
		}
	}
	return false
}

// movedBy reports whether the commit that last moved the position of every
// partition of ranges was one of the loads ids names, by the table's
// properties (loadKeyPrefix): snapshot expiry may have removed the
// snapshot committedBy looks for, never the properties.
func movedBy(tbl *table.Table, ranges []sink.Range, ids []string) bool {
	if len(ids) == 0 || len(ranges) == 0 {
		return false
	}
	props := tbl.Properties()
	for _, r := range ranges {
		if !slices.Contains(ids, props[loadKey(r.TopicPartition)]) {
			return false
		}
	}
	return true
}

// newLoadID names a commit that is not a load's (its snapshot's
// tracelake.load-id): a load's is sink.IdentityOf its batches.
func newLoadID() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// beginPositionsCommit begins a commit of tbl that moves its positions
// from start (as read from tbl) to next, and returns it with the summary
// of its snapshot: the positions it sets and loadID. The positions are
// computed from the table as read: the commit must land on exactly that
// snapshot. Pinned, a moved branch fails it (the retry reads the
// positions again), even if someone later sets commit.retry.num-retries,
// with which iceberg-go would otherwise replay these positions onto the
// newer table.
func beginPositionsCommit(tbl *table.Table, start, next map[sink.TopicPartition]int64, loadID string) (*table.Transaction, iceberggo.Properties, error) {
	txn := tbl.NewTransaction()
	if err := txn.AssertRefSnapshotID(""); err != nil {
		return nil, nil, err
	}
	set, err := setPositions(txn, tbl.Properties(), start, next)
	if err != nil {
		return nil, nil, err
	}
	// The load id of each partition this commit moves, beside its
	// position: the snapshot summary names the load too, but expiry
	// removes snapshots, and a retry after an unknown outcome must still
	// tell its own commit from another's (movedBy).
	loads := iceberggo.Properties{}
	for tp, n := range next {
		if o, ok := start[tp]; !ok || o != n {
			loads[loadKey(tp)] = loadID
		}
	}
	if len(loads) > 0 {
		if err := txn.SetProperties(loads); err != nil {
			return nil, nil, err
		}
	}
	summary := maps.Clone(set)
	summary[loadIDKey] = loadID
	return txn, summary, nil
}

// addFiles adds files to tbl in txn, in a snapshot with summary. With no
// file (a load of dead letters only moving the main table's positions) the
// snapshot is empty, but there is one: the positions are properties, and
// the catalog applies a commit's properties over the table's current ones
// checking only the commit's requirements, so a commit of properties alone
// would pass the snapshot assertion after another owner's commit of
// properties alone, and a stale owner would set a partition's position
// back.
func addFiles(ctx context.Context, txn *table.Transaction, tbl *table.Table, sc *iceberggo.Schema, add []iceberggo.DataFile, summary iceberggo.Properties) error {
	if len(add) == 0 {
		asc, err := arrowSchema(tbl, sc)
		if err != nil {
			return err
		}
		empty, err := array.NewRecordReader(asc, nil)
		if err != nil {
			return err
		}
		defer empty.Release()
		if err := txn.Append(ctx, empty, summary); err != nil {
			return fmt.Errorf("commit an empty snapshot with the positions: %w", err)
		}
		return nil
	}
	// The files have names of their own (a UUID each): iceberg-go's
	// duplicate check would read every manifest of the table on every
	// load to find none.
	if err := txn.AddDataFiles(ctx, add, summary, table.WithoutDuplicateCheck()); err != nil {
		return fmt.Errorf("add data files: %w", err)
	}
	return nil
}

// refence writes files of tbl (one of kind k's) again with only the rows
// keep takes, and counts the rows kept per partition. The files are read
// a row group at a time, each written as it is read: a stream's entry is
// a load's worth of files of the target size.
// Rare: only a partition that changed owner while its batch waited for
// its commit, or one a killed load left in doubt (indoubt.go), gets here.
func (s *Sink) refence(ctx context.Context, tbl *table.Table, files []iceberggo.DataFile, k kind,
	keep func(sink.TopicPartition, int64) bool) ([]iceberggo.DataFile, map[sink.TopicPartition]int64, error) {
	sc, err := arrowSchema(tbl, s.schemaOf(k))
	if err != nil {
		return nil, nil, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	counts := map[sink.TopicPartition]int64{}
	refenceHeld.Store(0)
	peakRefenceRows.Store(0)
	var readErr error
	written, err := s.writeFiles(ctx, tbl, sc, func(yield func(arrow.RecordBatch, error) bool) {
		for _, df := range files {
			more, err := readFenced(ctx, fs, df.FilePath(), sc, k == dlqTable, keep, counts, func(rec arrow.RecordBatch) bool {
				ok := yield(rec, nil) // WriteRecords releases rec
				holdRefence(-rec.NumRows())
				return ok
			})
			if err != nil {
				readErr = fmt.Errorf("read staged file %s again: %w", df.FilePath(), err)
				yield(nil, readErr)
				return
			}
			if !more {
				return
			}
		}
	})
	if readErr != nil {
		return nil, nil, readErr
	}
	if err != nil {
		return nil, nil, err
	}
	return written, counts, nil
}

// refenceHeld are the rows refence holds read and not yet written;
// peakRefenceRows the most since the last refence began. A test measures
// the memory bound with them.
var refenceHeld, peakRefenceRows atomic.Int64

func holdRefence(n int64) {
	if h := refenceHeld.Add(n); h > peakRefenceRows.Load() {
		peakRefenceRows.Store(h)
	}
}

// readFenced reads a staged Parquet file a batch of rows at a time
// (compactReadBatchRows) and hands the rows keep takes to yield, as record
// batches of schema sc (a slice per run of rows kept, yield's to release),
// adding them to counts per partition. It returns false if yield did.
func readFenced(ctx context.Context, fsys icebergio.IO, path string, sc *arrow.Schema, dlq bool,
	keep func(sink.TopicPartition, int64) bool, counts map[sink.TopicPartition]int64, yield func(arrow.RecordBatch) bool) (bool, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return false, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: compactReadBatchRows}, memory.DefaultAllocator)
	if err != nil {
		return false, err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return false, err
	}
	defer rr.Release()
	for rr.Next() {
		out, err := fenceRecord(rr.RecordBatch(), sc, dlq, keep, counts)
		if err != nil {
			return false, err
		}
		for i, rec := range out {
			if !yield(rec) {
				for _, rest := range out[i+1:] {
					holdRefence(-rest.NumRows())
					rest.Release()
				}
				return false, nil
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return true, nil
}

// pastPositions takes the rows past pos (a partition without one has
// none covered).
func pastPositions(pos map[sink.TopicPartition]int64) func(sink.TopicPartition, int64) bool {
	return func(tp sink.TopicPartition, o int64) bool {
		next, ok := pos[tp]
		return !ok || o >= next
	}
}

// fenceRecord is the rows of rec that takes accepts, as record batches
// of schema sc (a slice per run of rows kept), added to counts per
// partition.
func fenceRecord(rec arrow.RecordBatch, sc *arrow.Schema, dlq bool, takes func(sink.TopicPartition, int64) bool, counts map[sink.TopicPartition]int64) ([]arrow.RecordBatch, error) {
	topicCol, partCol, offsetCol := "ktopic", "kpartition", "koffset"
	if dlq {
		topicCol, partCol, offsetCol = "topic", "partition", "offset"
	}
	cols := make([]arrow.Array, sc.NumFields())
	for i, field := range sc.Fields() {
		idx := rec.Schema().FieldIndices(field.Name)
		if len(idx) == 0 || !arrow.TypeEqual(rec.Column(idx[0]).DataType(), field.Type) {
			return nil, fmt.Errorf("column %s is not tracelake's %s", field.Name, field.Type)
		}
		cols[i] = rec.Column(idx[0])
	}
	conformed := array.NewRecordBatch(sc, cols, rec.NumRows())
	defer conformed.Release()
	topics := cols[sc.FieldIndices(topicCol)[0]].(*array.String)
	parts := cols[sc.FieldIndices(partCol)[0]].(*array.Int32)
	offsets := cols[sc.FieldIndices(offsetCol)[0]].(*array.Int64)
	var out []arrow.RecordBatch
	keep := func(from, to int) {
		out = append(out, conformed.NewSlice(int64(from), int64(to)))
		holdRefence(int64(to - from))
	}
	run := -1
	for i := range int(conformed.NumRows()) {
		tp := sink.TopicPartition{Topic: topics.Value(i), Partition: parts.Value(i)}
		if takes(tp, offsets.Value(i)) {
			counts[tp]++
			if run < 0 {
				run = i
			}
		} else if run >= 0 {
			keep(run, i)
			run = -1
		}
	}
	if run >= 0 {
		keep(run, int(conformed.NumRows()))
	}
	return out, nil
}

// Rebuild is a rebuild of the derived table begun by BeginRebuild: the
// main table's positions before its rows were read.
type Rebuild struct {
	mainPos map[sink.TopicPartition]int64
}

// UpTo is the last offset per partition of the main table's rows the
// rebuild covers: the caller derives the new rows from those rows only
// (a load may commit more while it reads them).
func (r *Rebuild) UpTo() map[sink.TopicPartition]int64 {
	last := make(map[sink.TopicPartition]int64, len(r.mainPos))
	for tp, next := range r.mainPos {
		last[tp] = next - 1
	}
	return last
}

// BeginRebuild reads the main table's positions, before the caller reads
// the main table's rows to derive the new rows from. Every main row below
// them is committed by then (a load commits its rows with its positions
// and never adds one below them), so the rows read after hold them; the
// rebuild covers those and leaves every derived row past them as loaded.
func (s *Sink) BeginRebuild(ctx context.Context) (*Rebuild, error) {
	if s.opt.Derived == nil {
		return nil, errors.New("no derived table is configured")
	}
	main, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	pos, err := positions(main)
	if err != nil {
		return nil, err
	}
	return &Rebuild{mainPos: pos}, nil
}

// ReplaceDerived replaces the derived table's (Options.Derived) rows of
// the main rows BeginRebuild's positions cover with the NDJSON rows of
// chunks, derived from those main rows only (Rebuild.UpTo), in one
// commit that deletes the old ones (copy-on-write) and adds the new. The
// derived rows past those positions stay as loaded: a load commits its
// derived rows before its main rows, so a load running beside the rebuild
// may have derived rows there whose main rows commit later (replacing
// them too lost them), or whose main rows the rebuild did not read. The
// derived table's positions become at least the main table's of then:
// positions a failed load left ahead with no rows there would otherwise
// fence out the rows of the records read again. A load committing derived
// rows meanwhile makes the commit lose its race; it is made again over
// the table as it then stands. It returns the rows written.
func (s *Sink) ReplaceDerived(ctx context.Context, r *Rebuild, chunks [][]byte) (int64, error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	tbl, err := s.loadTable(ctx, s.derived)
	if err != nil {
		return 0, err
	}
	sc, err := arrowSchema(tbl, s.derivedSchema)
	if err != nil {
		return 0, err
	}
	// Every chunk's files are written before the one commit, outside any
	// snapshot until then: leased from when each is created until the
	// commit, as a compaction's, so that `tracelake orphans` keeps them
	// however long the rebuild takes.
	created, release := s.leaseOutput(ctx, tbl.Identifier())
	defer release()
	leased := table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), noticeCreates(tbl.FS, created), nil)
	counts := map[sink.TopicPartition]int64{}
	var added []iceberggo.DataFile
	for _, chunk := range chunks {
		rec, err := buildTypedRecord(sc, s.opt.Derived, chunk, counts)
		if err != nil {
			s.removeFiles(ctx, tbl, added)
			return 0, err
		}
		if rec == nil {
			continue
		}
		files, err := s.writeFiles(ctx, leased, sc, func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
		if err != nil {
			s.removeFiles(ctx, tbl, added)
			return 0, err
		}
		added = append(added, files...)
	}
	for tp := range counts {
		// Its derived rows as loaded stay: these would double them.
		if _, ok := r.mainPos[tp]; !ok {
			s.removeFiles(ctx, tbl, added)
			return 0, fmt.Errorf("BUG: rebuild of %s: rows derived from partition %s, which the rebuild does not cover", name(s.derived), tp)
		}
	}
	// Leased now, not at the next renewal, and looked up: one written
	// long ago may be gone already (a lease that lapsed, another tool's
	// cleanup).
	if err := s.renewLeases(ctx); err != nil {
		s.removeFiles(ctx, tbl, added)
		return 0, fmt.Errorf("lease the rebuild's files before committing them: %w", err)
	}
	if err := s.outputExists(ctx, tbl, added); err != nil {
		s.removeFiles(ctx, tbl, added)
		return 0, err
	}
	for attempt := 1; ; attempt++ {
		committed, err := s.commitRebuild(ctx, tbl, r, added)
		if err == nil {
			s.remember(committed)
			break
		}
		if !LostRace(err) {
			// Committed or not, nobody can tell: the files stay (orphan
			// cleanup removes them if unreferenced).
			return 0, fmt.Errorf("commit the rebuild of %s: %w", name(s.derived), err)
		}
		if attempt == maintenanceAttempts {
			s.removeFiles(ctx, tbl, added)
			return 0, fmt.Errorf("commit the rebuild of %s: lost %d races in a row with loads, the last: %w", name(s.derived), attempt, err)
		}
		s.log.Info("the rebuild's commit lost a race with a load; making it again", "table", name(s.derived), "attempt", attempt)
		if tbl, err = s.loadTable(ctx, s.derived); err != nil {
			return 0, err
		}
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, nil
}

// commitRebuild commits, over the derived table tbl as read, the deletion
// of its rows below r's positions and the rebuilt files added, pinned to
// tbl's snapshot.
func (s *Sink) commitRebuild(ctx context.Context, tbl *table.Table, r *Rebuild, added []iceberggo.DataFile) (*table.Table, error) {
	had, err := positions(tbl)
	if err != nil {
		return nil, err
	}
	next := maps.Clone(had)
	for tp, n := range r.mainPos {
		next[tp] = max(next[tp], n)
	}
	txn := tbl.NewTransaction()
	if err := txn.AssertRefSnapshotID(""); err != nil {
		return nil, err
	}
	if err := takePositions(txn, tbl, next); err != nil {
		return nil, err
	}
	props := iceberggo.Properties{"tracelake.operation": "rebuild"}
	if below := belowPositions(r.mainPos); below != nil && tbl.CurrentSnapshot() != nil {
		if err := txn.Delete(ctx, below, props); err != nil {
			return nil, fmt.Errorf("delete the rebuilt rows of %s: %w", name(s.derived), err)
		}
	}
	if len(added) > 0 {
		if err := txn.AddDataFiles(ctx, added, props); err != nil {
			return nil, fmt.Errorf("add the rebuilt files of %s: %w", name(s.derived), err)
		}
	}
	if s.beforeRebuildCommit != nil {
		s.beforeRebuildCommit()
	}
	return txn.Commit(ctx)
}

// belowPositions is the filter of a derived table's rows below pos, per
// partition; nil for none.
func belowPositions(pos map[sink.TopicPartition]int64) iceberggo.BooleanExpression {
	var parts []iceberggo.BooleanExpression
	for tp, n := range pos {
		if n <= 0 {
			continue
		}
		parts = append(parts, iceberggo.NewAnd(
			iceberggo.EqualTo(iceberggo.Reference(schema.TopicColumn), tp.Topic),
			iceberggo.EqualTo(iceberggo.Reference(schema.PartitionColumn), tp.Partition),
			iceberggo.LessThan(iceberggo.Reference(schema.OffsetColumn), n)))
	}
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	default:
		return iceberggo.NewOr(parts[0], parts[1], parts[2:]...)
	}
}

// takePositions sets, in txn of table tbl, tbl's positions to pos: every
// partition's pos has, none other.
func takePositions(txn *table.Transaction, tbl *table.Table, pos map[sink.TopicPartition]int64) error {
	set := iceberggo.Properties{}
	for tp, n := range pos {
		set[positionKey(tp)] = strconv.FormatInt(n, 10)
	}
	var drop []string
	for k := range tbl.Properties() {
		if _, kept := set[k]; isPositionKey(k) && !kept {
			drop = append(drop, k)
		}
	}
	if len(drop) > 0 {
		if err := txn.RemoveProperties(drop); err != nil {
			return err
		}
	}
	if len(set) > 0 {
		return txn.SetProperties(set)
	}
	return nil
}
