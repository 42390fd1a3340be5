package databend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// maxRounds bounds the attempts of one load that each leave out the rows
// Databend rejected in the previous one. Each round at least halves the
// part of a file whose rejects are not yet known, so 64 rounds is far more
// than a 16 MiB file can need.
const maxRounds = 64

// maxClaimAge bounds how long after reading its claims a load may send
// its COMMIT: with an idle transaction's life (maxIdleTxnSecs) it stays
// well within the load history's (minHistoryHours), which its claims
// need.
const maxClaimAge = 4 * time.Hour

// Load runs one transaction: read the ledger positions of the files'
// partitions, claim them (claim: of two loads that read the same
// position, one commits), COPY the files (one COPY INTO for all main
// files, one for all dead-letter files), insert the ledger rows, COMMIT. Any failure
// rolls the whole load back; the retry starts again from the ledger, so a
// COPY or COMMIT whose reply was lost is never loaded twice.
//
// Rows Databend rejects (a type the table cannot take) do not fail the
// load: COPY runs with ON_ERROR = CONTINUE and reports, per file, how many
// rows it rejected and the first one. The transaction is then rolled back,
// each such row goes to the dead-letter table with Databend's error, the
// rest of its file is staged again in pieces, and the load runs again.
// On success the files are removed from the stage (purge), and at the
// process's first load and every pruneEvery loads after it the fence
// table's rows below each partition's highest claim are deleted
// (pruneClaims).
func (s *Sink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	if len(files) == 0 {
		return sink.Loaded{}, nil
	}
	p := &loadPlan{files: files, pieces: map[string][]*piece{}}
	loadID := sink.LoadIdentity(files)
	loaded, err := s.loadRounds(ctx, p)
	if err != nil {
		s.dropPlan(ctx, p)
		var uncertain *sink.UncertainCommitError
		s.unsettle(loadID, files, p.markers, errors.As(err, &uncertain))
		return sink.Loaded{}, fmt.Errorf("load %d files into %s: %w", len(files), s.opt.Table, err)
	}
	p.staged = s.settle(loadID, p.staged)
	s.purge(ctx, p)
	s.pruneClaims(ctx)
	return loaded, nil
}

// loadRounds runs the load's transaction until no row is rejected,
// leaving out the rows each round's COPY rejected.
func (s *Sink) loadRounds(ctx context.Context, p *loadPlan) (sink.Loaded, error) {
	for round := 1; ; round++ {
		loaded, rejected, err := s.loadTx(ctx, p)
		if err != nil {
			return sink.Loaded{}, err
		}
		if len(rejected) == 0 {
			return loaded, nil
		}
		if round == maxRounds {
			return sink.Loaded{}, fmt.Errorf("%w: Databend still rejects rows after %d rounds of leaving them out", sink.ErrFatal, round)
		}
		if err := s.leaveOut(ctx, p, rejected); err != nil {
			return sink.Loaded{}, err
		}
	}
}

// dropPlan removes from the stage what a failed load staged for itself
// (the pieces of files with rejected or already loaded rows, the file of
// its rejects): every attempt plans afresh and stages what it copies
// again, and no other load names them (they are named after this
// process's files, whose names no other staging uses, sink.Batch.Name).
// Its transaction has ended, and a COMMIT whose reply was lost does not
// read the stage again (COPY read the files). The claim markers stay:
// another process's load may be about to copy the same marker, and the
// next load naming it stages and purges it (claim.go). The load's own
// files stay too: its retry loads them, or Discard removes them. Best
// effort: a file left behind is only ever loaded through the ledger
// check.
func (s *Sink) dropPlan(ctx context.Context, p *loadPlan) {
	var own []sink.File
	for _, name := range p.staged {
		if !slices.Contains(p.markers, name) {
			own = append(own, sink.File{RowsPath: name})
		}
	}
	if len(own) == 0 {
		return
	}
	s.forget(own)
	if err := s.remove(context.WithoutCancel(ctx), own); err != nil {
		s.log.Warn("files a failed load staged stay in the stage: remove failed", "files", len(own), "err", err)
	}
}

// purge forgets the loaded files and, with Purge, removes them and the
// pieces staged for them from the stage.
func (s *Sink) purge(ctx context.Context, p *loadPlan) {
	all := slices.Clone(p.files)
	for _, name := range p.staged {
		all = append(all, sink.File{RowsPath: name})
	}
	s.forget(all)
	if !s.opt.Purge {
		return
	}
	if err := s.remove(ctx, all); err != nil {
		s.log.Warn("loaded files stay in the stage: remove failed", "files", len(p.files), "err", err)
	}
}

// loadPlan is one load and what earlier rounds of it learned.
type loadPlan struct {
	files []sink.File
	// pieces replace a staged file (by name) whose rows must be loaded in
	// part: some were rejected, or a former owner loaded some.
	pieces      map[string][]*piece
	rejects     []rejectRow
	rejectsFile string   // staged dead-letter file holding rejects
	staged      []string // every name staged by this load, for purge
	markers     []string // the claim markers among staged (see dropPlan)
}

// piece is a part of a staged file, staged under its own name.
type piece struct {
	name   string
	origin string // the staged file it comes from
	idx    []int  // the origin's line numbers (0-based) it holds
}

// rejectRow is a row Databend rejected, as a dead-letter row.
type rejectRow struct {
	tp      sink.TopicPartition
	offset  int64
	row     []byte
	reason  string
	derived bool // a derived table's row: its main row loaded
	// at is a declared table's main row's coordinates, which the rows
	// derived from it share (nil otherwise).
	at *rowAt
}

// copyOutcome is COPY's report on one file.
type copyOutcome struct {
	loaded, errors int64
	firstError     string
	firstLine      int64 // 1-based, within the file
}

func (s *Sink) loadTx(ctx context.Context, p *loadPlan) (_ sink.Loaded, rejected map[string]copyOutcome, err error) {
	ss, end, err := s.begin(ctx)
	if err != nil {
		return sink.Loaded{}, nil, err
	}
	committed := false
	defer func() { end(committed) }()

	var parts []sink.TopicPartition
	for _, f := range p.files {
		for _, r := range f.Ranges {
			if !slices.Contains(parts, r.TopicPartition) {
				parts = append(parts, r.TopicPartition)
			}
		}
	}
	// The claims before the ledger: see claim.go.
	claimed := time.Now()
	claims, err := s.readClaims(ctx, ss, parts)
	if err != nil {
		return sink.Loaded{}, nil, err
	}
	s.notePrunable(claims)
	fence, err := s.lastLoaded(ctx, ss, parts)
	if err != nil {
		return sink.Loaded{}, nil, err
	}
	main, dlq, derived, counts, err := s.targets(ctx, p, fence)
	if err != nil {
		return sink.Loaded{}, nil, err
	}
	// Claimed before any row is copied: a load that lost its claim to
	// another load of a partition fails before copying the rest.
	fenced := sink.Fence(p.files, fence)
	if err := s.claim(ctx, ss, p, claims, fence, fenced.Ranges); err != nil {
		return sink.Loaded{}, nil, err
	}
	for _, c := range []struct {
		table   string
		targets []target
	}{{s.tables.main, main}, {s.tables.derived, derived}} {
		outcome, err := s.copyFiles(ctx, ss, p, c.table, c.targets)
		if err != nil {
			return sink.Loaded{}, nil, err
		}
		for name, o := range outcome {
			if o.errors > 0 {
				if rejected == nil {
					rejected = map[string]copyOutcome{}
				}
				rejected[name] = o
			}
		}
	}
	if len(rejected) > 0 {
		return sink.Loaded{}, rejected, nil // rolled back; the next round leaves them out
	}
	dlqOutcome, err := s.copyFiles(ctx, ss, p, s.tables.dlq, dlq)
	if err != nil {
		return sink.Loaded{}, nil, err
	}
	if err := checkDeadLettered(s.tables.dlq, dlqOutcome); err != nil {
		return sink.Loaded{}, nil, err
	}
	ranges := counts.ranges(fenced.Ranges)
	// The same for every attempt and round of these files: an attempt
	// whose COMMIT landed, its reply lost (or late: the ledger read of a
	// later attempt sees it, see copyFiles), is told from another load
	// by it.
	loadID := sink.LoadIdentity(p.files)
	var own []sink.Range
	if !fenced.Exact {
		if own, err = s.ownRanges(ctx, ss, loadID); err != nil {
			return sink.Loaded{}, nil, err
		}
	}
	if len(ranges) > 0 {
		if _, err := ss.query(ctx, ledgerInsert(s.tables.ledger, ranges, loadID, len(p.files))); err != nil {
			return sink.Loaded{}, nil, fmt.Errorf("insert ledger rows: %w", err)
		}
	}
	if age := time.Since(claimed); age > maxClaimAge {
		// Its claims may be forgotten by the load history before it
		// lands (see client.go, minHistoryHours).
		return sink.Loaded{}, nil, &transientError{fmt.Errorf("the load's transaction read its claims %s ago, more than %s; loading again from fresh reads", age.Round(time.Second), maxClaimAge)}
	}
	loaded := sink.Loaded{LoadID: loadID, Ranges: ranges, Rejected: p.rejected(), Own: own}
	if _, err := ss.query(ctx, "COMMIT"); err != nil {
		// Landed with its reply lost, the rows it dead-lettered are
		// known only here: the attempt that finds it in the ledger
		// fences them out.
		return sink.Loaded{}, nil, &sink.UncertainCommitError{Err: fmt.Errorf("commit: %w", err), Would: loaded}
	}
	committed = true
	return loaded, nil, nil
}

// LoadedAs implements sink.LoadFinder. A COMMIT that lands later than
// the question (its reply lost, the server still at it) is not seen.
// A load it finds landed, whose attempts all failed here, is purged as a
// load that committed is: no attempt of it comes to do so.
func (s *Sink) LoadedAs(ctx context.Context, loadID string) ([]sink.Range, error) {
	own, err := s.ownRanges(ctx, s.c.session(), loadID)
	if err != nil || len(own) == 0 {
		return own, err
	}
	s.mu.Lock()
	u := s.unsettled[loadID]
	s.mu.Unlock()
	if u != nil {
		p := &loadPlan{files: u.files}
		p.staged = s.settle(loadID, nil)
		s.purge(ctx, p)
	}
	return own, nil
}

// unsettledLoad is a load whose last attempt failed: its files, and the
// claim markers copied by its attempts whose COMMIT went unanswered.
type unsettledLoad struct {
	files   []sink.File
	markers []string
}

// unsettle notes that an attempt of the load loadID failed, and, if its
// COMMIT went unanswered (uncertain), the claim markers it copied: that
// COMMIT may have landed, committing them, and no later load names a
// marker whose claim committed (claim.go), so they are the load's to
// purge. dropPlan leaves a failed attempt's markers, as another process's
// load may be copying the same marker; removed once the load is settled,
// such a load at worst starts again from a fresh read.
func (s *Sink) unsettle(loadID string, files []sink.File, markers []string, uncertain bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unsettled[loadID]
	if u == nil {
		u = &unsettledLoad{files: files}
		s.unsettled[loadID] = u
	}
	if uncertain {
		for _, m := range markers {
			if !slices.Contains(u.markers, m) {
				u.markers = append(u.markers, m)
			}
		}
	}
}

// settle forgets the failed attempts of the load loadID and returns
// staged with the markers of those whose COMMIT went unanswered added.
func (s *Sink) settle(loadID string, staged []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unsettled[loadID]
	if u == nil {
		return staged
	}
	delete(s.unsettled, loadID)
	for _, m := range u.markers {
		if !slices.Contains(staged, m) {
			staged = append(staged, m)
		}
	}
	return staged
}

// ownRanges are the ledger rows recorded as loadID's (sink.Loaded.Own),
// read in the load's transaction, as its fence was: an earlier attempt of
// the same files committed them.
func (s *Sink) ownRanges(ctx context.Context, ss *session, loadID string) ([]sink.Range, error) {
	res, err := ss.query(ctx, fmt.Sprintf(`SELECT topic, "partition", first_offset, last_offset, records, dlq_records FROM %s WHERE load_id = %s`,
		s.tables.ledger, sqltext.DatabendString(loadID)))
	if err != nil {
		return nil, fmt.Errorf("read the ledger rows of load %s: %w", loadID, err)
	}
	own := []sink.Range{}
	for _, row := range res.Rows {
		var n [5]int64
		ok := len(row) == 6 && row[0] != nil
		for i := 1; ok && i < 6; i++ {
			var err error
			ok = row[i] != nil
			if ok {
				n[i-1], err = strconv.ParseInt(*row[i], 10, 64)
				ok = err == nil
			}
		}
		if !ok {
			return nil, fmt.Errorf("read the ledger rows of load %s: unexpected row %v", loadID, deref(row))
		}
		own = append(own, sink.Range{TopicPartition: sink.TopicPartition{Topic: *row[0], Partition: int32(n[0])},
			First: n[1], Last: n[2], Records: n[3], DLQ: n[4]})
	}
	return own, nil
}

// target is a staged name to COPY and the rows it holds.
type target struct {
	name string
	rows int64
}

// tally counts the rows a load writes per partition.
type tally map[sink.TopicPartition]*[3]int64 // records, dead letters, of which derived rows

func (t tally) add(tp sink.TopicPartition, records, dlq int64) *[3]int64 {
	c := t[tp]
	if c == nil {
		c = &[3]int64{}
		t[tp] = c
	}
	c[0] += records
	c[1] += dlq
	return c
}

// ranges returns the fenced ranges with the counts of the tally.
func (t tally) ranges(fenced []sink.Range) []sink.Range {
	out := make([]sink.Range, 0, len(fenced))
	for _, r := range fenced {
		if c := t[r.TopicPartition]; c != nil {
			r.Records, r.DLQ, r.DerivedDLQ = c[0], c[1], c[2]
		} else {
			r.Records, r.DLQ, r.DerivedDLQ = 0, 0, 0
		}
		out = append(out, r)
	}
	return out
}

// targets decides what this round copies: each file whole, or the pieces
// that replace it, or nothing when the ledger has all of it. A file a
// former owner of the partition loaded in part is staged again as a piece
// holding only the rows past the ledger. It also counts the rows per
// partition for the ledger (derived rows are not counted: they come with
// their main rows).
func (s *Sink) targets(ctx context.Context, p *loadPlan, ledger map[sink.TopicPartition]int64) (main, dlq, derived []target, counts tally, err error) {
	r := &roundTargets{counts: tally{}}
	// Each file is fenced by the ledger advanced past the files before it:
	// a file re-reading offsets an earlier file of this load covers adds
	// none of them (see sink.Runs).
	fence := maps.Clone(ledger)
	for _, f := range p.files {
		if err := s.target(ctx, p, f, fence, r); err != nil {
			return nil, nil, nil, nil, err
		}
		sink.Advance(fence, f.Ranges)
	}
	if err := s.fenceRejects(ctx, p, ledger); err != nil {
		return nil, nil, nil, nil, err
	}
	if p.rejectsFile != "" {
		r.dlq = append(r.dlq, target{p.rejectsFile, int64(len(p.rejects))})
		for _, rej := range p.rejects {
			if c := r.counts.add(rej.tp, 0, 1); rej.derived {
				c[2]++ // beside its main row, which is counted
			}
		}
	}
	return r.main, r.dlq, r.derived, r.counts, nil
}

// roundTargets are what one round of a load copies into each table, and
// the rows it counts per partition.
type roundTargets struct {
	main, dlq, derived []target
	counts             tally
}

// target adds what this round copies of file f, fenced by fence, to r,
// and counts its rows.
func (s *Sink) target(ctx context.Context, p *loadPlan, f sink.File, fence map[sink.TopicPartition]int64, r *roundTargets) error {
	switch f.Overlap(fence) {
	case sink.OverlapAll:
		return nil
	case sink.OverlapNone:
		_, split := p.pieces[f.RowsPath]
		if f.RowsPath != "" && !split {
			r.main = append(r.main, target{f.RowsPath, sumRanges(f, false)})
		}
		if _, split := p.pieces[f.DerivedPath]; f.DerivedPath != "" && !split {
			k := s.keptLines(f.DerivedPath)
			if k == nil {
				return fmt.Errorf("%w: staged file %s is not kept in this process", sink.ErrFatal, f.DerivedPath)
			}
			r.derived = append(r.derived, target{f.DerivedPath, int64(len(k.Lines()))})
		}
		if f.DLQPath != "" {
			r.dlq = append(r.dlq, target{f.DLQPath, sumRanges(f, true)})
		}
		for _, rg := range f.Ranges {
			if split {
				r.counts.add(rg.TopicPartition, 0, rg.DLQ) // the pieces' rows are counted below
			} else {
				r.counts.add(rg.TopicPartition, rg.Records, rg.DLQ)
			}
		}
	case sink.OverlapPartial:
		s.log.Info("load overlaps the ledger or an earlier file of the load (the partition was read again, or a former owner loaded part of it); loading only the rows past it",
			"file", f.Name)
		for _, name := range []string{f.RowsPath, f.DLQPath, f.DerivedPath} {
			if name == "" {
				continue
			}
			if err := s.fence(ctx, p, name, fence, name == f.DLQPath); err != nil {
				return err
			}
		}
		for _, pc := range p.pieces[f.DLQPath] {
			r.dlq = append(r.dlq, target{pc.name, int64(len(pc.idx))})
			s.countLines(r.counts, pc, true)
		}
	}
	for _, pc := range p.pieces[f.RowsPath] {
		r.main = append(r.main, target{pc.name, int64(len(pc.idx))})
		s.countLines(r.counts, pc, false)
	}
	for _, pc := range p.pieces[f.DerivedPath] {
		r.derived = append(r.derived, target{pc.name, int64(len(pc.idx))})
	}
	return nil
}

// countLines adds a piece's rows to the tally by the partition of each.
func (s *Sink) countLines(counts tally, pc *piece, dlq bool) {
	k := s.keptLines(pc.origin)
	for _, i := range pc.idx {
		tp := s.lineTP(k, i, dlq)
		if dlq {
			counts.add(tp, 0, 1)
		} else {
			counts.add(tp, 1, 0)
		}
	}
}

// copyFiles loads the targets into table with one COPY INTO naming every
// file, and checks that each file's rows were all loaded or rejected.
// FORCE = FALSE: Databend's load history skips a file it has loaded
// before. The ledger read in this transaction says these files are not
// loaded; a file the history skips anyway was committed after that read
// (a COMMIT whose reply was lost landed late: the history is current,
// the transaction's ledger read is not). So the load fails, to be retried
// from a fresh ledger read, which then sees the file loaded. Only a file
// the history keeps skipping over historyRetries fresh reads is taken for
// a load outside tracelake's ledger and copied with FORCE = TRUE.
func (s *Sink) copyFiles(ctx context.Context, ss *session, p *loadPlan, table string, targets []target) (map[string]copyOutcome, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	got, skipped, err := s.copyOnce(ctx, ss, table, targets, false)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		if s.historyDisagrees(skipped) {
			return nil, &transientError{fmt.Errorf("COPY INTO %s: Databend's load history has %d of the files this load's ledger read does not (a commit landed after the read); loading again from a fresh read", table, len(skipped))}
		}
		s.log.Warn("Databend's load history skipped files the ledger has still not loaded after several fresh reads; copying them again with FORCE = TRUE",
			"table", table, "files", len(skipped))
		again := make([]target, 0, len(skipped))
		for _, t := range targets {
			if slices.Contains(skipped, t.name) {
				again = append(again, t)
			}
		}
		forced, _, err := s.copyOnce(ctx, ss, table, again, true)
		if err != nil {
			return nil, err
		}
		maps.Copy(got, forced)
	}
	return got, checkCopied(table, targets, got)
}

// copyOnce runs one COPY INTO table of the targets, and returns COPY's
// report on each file and the names the load history skipped.
func (s *Sink) copyOnce(ctx context.Context, ss *session, table string, targets []target, force bool) (map[string]copyOutcome, []string, error) {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	res, err := ss.query(ctx, s.copySQL(table, names, force))
	if err != nil {
		return nil, nil, fmt.Errorf("copy %d files into %s: %w", len(names), table, err)
	}
	got := copyResult(res)
	var skipped []string
	for _, n := range names {
		if _, ok := got[n]; !ok {
			skipped = append(skipped, n)
		}
	}
	return got, skipped, nil
}

// checkCopied checks that COPY took every row of each target (loaded or
// rejected): a file that held more or fewer rows than staged is a fault
// no retry mends.
func checkCopied(table string, targets []target, got map[string]copyOutcome) error {
	for _, t := range targets {
		if o := got[t.name]; o.loaded+o.errors != t.rows {
			return fmt.Errorf("%w: COPY INTO %s took %d rows (%d rejected) from %s, which holds %d", sink.ErrFatal, table, o.loaded+o.errors, o.errors, t.name, t.rows)
		}
	}
	return nil
}

// checkDeadLettered fails a load whose COPY INTO the dead-letter table
// rejected rows (ON_ERROR = CONTINUE reports them and goes on): a dead
// letter has no other table to go to, and committed without it, the
// ledger counts it as dead-lettered and an OTLP request holding it is
// answered stored, its client never sending it again. No retry makes the
// table take it: the run stops (sink.ErrFatal) with Databend's reason,
// the transaction rolled back.
func checkDeadLettered(table string, got map[string]copyOutcome) error {
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if o := got[name]; o.errors > 0 {
			return fmt.Errorf("%w: %s refused %d dead letters of %s (line %d: %s): they have nowhere else to go, so nothing of the load is committed",
				sink.ErrFatal, table, o.errors, name, o.firstLine, o.firstError)
		}
	}
	return nil
}

// copySQL is the reference's COPY, made exact: the files are named (no
// pattern), nothing is purged inside the transaction (a rolled-back load
// must find its files again), a rejected row is reported, not loaded.
func (s *Sink) copySQL(table string, names []string, force bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "COPY INTO %s FROM %s FILES = (%s) FILE_FORMAT = (TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO) PURGE = FALSE FORCE = %s ON_ERROR = CONTINUE",
		table, s.location(), sqltext.QuoteAll(names, sqltext.DatabendString), strings.ToUpper(strconv.FormatBool(force)))
	if s.opt.DisableVariantCheck {
		b.WriteString(" DISABLE_VARIANT_CHECK = TRUE")
	}
	return b.String()
}

// copyResult reads COPY's reply, one row per file loaded: File,
// Rows_loaded, Errors_seen, First_error, First_error_line. Files are
// keyed by base name (the reply may include the stage path).
func copyResult(res *result) map[string]copyOutcome {
	col := map[string]int{"file": 0, "rows_loaded": 1, "errors_seen": 2, "first_error": 3, "first_error_line": 4}
	for i, c := range res.Columns {
		if _, ok := col[strings.ToLower(c)]; ok {
			col[strings.ToLower(c)] = i
		}
	}
	get := func(row []*string, name string) string {
		if i := col[name]; i < len(row) && row[i] != nil {
			return *row[i]
		}
		return ""
	}
	out := map[string]copyOutcome{}
	for _, row := range res.Rows {
		name := get(row, "file")
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		o := out[name]
		n, _ := strconv.ParseInt(get(row, "rows_loaded"), 10, 64)
		e, _ := strconv.ParseInt(get(row, "errors_seen"), 10, 64)
		o.loaded += n
		o.errors += e
		if o.firstError == "" {
			o.firstError = get(row, "first_error")
			o.firstLine, _ = strconv.ParseInt(get(row, "first_error_line"), 10, 64)
		}
		out[name] = o
	}
	return out
}

func sumRanges(f sink.File, dlq bool) int64 {
	var n int64
	for _, r := range f.Ranges {
		if dlq {
			n += r.DLQ
		} else {
			n += r.Records
		}
	}
	return n
}

func ledgerInsert(ledger string, ranges []sink.Range, loadID string, files int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `INSERT INTO %s (topic, "partition", first_offset, last_offset, records, dlq_records, load_id, files, loaded_at, topic_id) VALUES `, ledger)
	for i, r := range ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		id := "NULL" // unknown: not checked
		if r.TopicID != "" {
			id = sqltext.DatabendString(r.TopicID)
		}
		fmt.Fprintf(&b, "(%s, %d, %d, %d, %d, %d, %s, %d, NOW(), %s)",
			sqltext.DatabendString(r.Topic), r.Partition, r.First, r.Last, r.Records, r.DLQ, sqltext.DatabendString(loadID), files, id)
	}
	return b.String()
}

// historyRetries is how many loads in a row may find files in COPY's load
// history that their ledger read lacks before the history is taken for a
// load outside tracelake's ledger (see copyFiles).
const historyRetries = 3

// historyDisagrees counts one more disagreement for each of names and
// reports whether any of them is still within historyRetries.
func (s *Sink) historyDisagrees(names []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	retry := false
	for _, n := range names {
		s.disagree[n]++
		if s.disagree[n] < historyRetries {
			retry = true
		}
	}
	return retry
}
