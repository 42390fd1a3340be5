package databend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Two loads of one partition can run at once: a former owner's load that
// outlived the revoke, a process that lost its group membership without
// noticing, a killed process's COMMIT landing after its restart. Each
// reads the ledger in its transaction, but Databend does not serialise
// two transactions that read a table and append to it: a COMMIT whose
// table moved on merges its appended segments onto the latest snapshot
// (storages/fuse/src/retry/commit.rs, commit_with_backoff and
// try_rebuild_req; SegmentsDiff::apply in retry/diff.rs refuses only
// segments the transaction replaced), so both loads committed and the
// offsets they share were stored twice.
//
// What Databend does refuse is a file two transactions both COPY with
// FORCE = FALSE: COPY skips a file its load history has
// (builder_copy_into_table.rs: insert_if_not_exists = !force), and the
// COMMIT of a transaction whose COPY named a file another transaction
// committed meanwhile fails on the meta service's condition on the file's
// key (meta/api table_api.rs, update_multi_table_meta:
// DuplicatedUpsertFiles 2014). So each load claims each partition it
// writes by copying a marker file into the fence table, named by the
// partition and its next claim number (claimsRead.next), read in the
// load's transaction before its ledger read. A claim commits only if no
// other claim of its number committed before, and its row makes the
// number read next grow past it, so the first claim to commit after a
// read is numbered as that read says: claims commit one at a time in
// that numbering. Two loads that read the same number name the same
// marker, and at most one of them commits; a load whose number a commit
// took after its read finds its marker in the load history (the history
// and the fence table commit together). Either way the load
// fails, retryable, and its retry reads both afresh. The number is read
// first because Databend reads a table the transaction has not written at
// its latest snapshot, statement by statement (session transaction.rs,
// get_table_from_buffer holds only mutated tables): any claim committed
// between the two reads took this load's number, so a ledger read newer
// than the number cannot slip through. A marker is never forced.
//
// A claim's number, not the ledger position, names its marker: a
// partition started over (its topic recreated and its ledger rows
// deleted, docs/OPERATIONS.md) reads positions the old log's loads
// already claimed, whose markers the load history keeps. The markers'
// content is the same for everyone naming them (an upload of a marker
// never changes what another load copies), and they are removed from the
// stage with the load's files.
//
// Each fence row holds its claim's number (claim), and a partition's
// next number is one past its highest. Numbers only grow, and a prune
// deletes only rows below a partition's highest (pruneClaims), so the
// fence table holds a few rows per partition, not one per load for ever,
// and a partition started over never names a marker of its old log.
// Releases before this one numbered a claim by the partition's row count
// and copied rows without a number (they read NULL in the column Prepare
// adds to their table). The next number is therefore at least the row
// count: on rows only such a release wrote it is the count, so a load of
// this release and one of that release still in flight (its process
// stopped, its COMMIT on its way) that read the same rows name the same
// marker. Once a numbered claim is above them, those rows are pruned
// with the numbered ones below it. An older release counts the rows, so
// it must not run beside this one once rows are pruned (its Prepare
// refuses the claim column).

// fenceColumns are the fence table's: one row per claim. claim is its
// number, NULL in the rows of older releases (see above).
var fenceColumns = []column{
	{"topic", "VARCHAR", ""},
	{"partition", "INT", ""},
	{"after_offset", "BIGINT", ""},
	{"claim", "BIGINT", "NULL"},
}

// claimsRead is one read of a partition's claims in the fence table: the
// rows it holds, and one past the highest claim number among them (0:
// none is numbered). The zero value is a partition never claimed.
type claimsRead struct{ rows, past int64 }

// next is the number of the partition's next claim: one past the
// highest, and at least the row count, as an older release numbered it
// (see above). Loads that read the same rows compute the same number,
// and the commit of a claim makes it grow past the claim.
func (c claimsRead) next() int64 { return max(c.rows, c.past) }

// readClaims reads, in the session ss, the claims of each of parts in the
// fence table (absent: none). It scans the rows of parts' topics, a few
// per partition (pruneClaims); those of other partitions are left out.
func (s *Sink) readClaims(ctx context.Context, ss *session, parts []sink.TopicPartition) (map[sink.TopicPartition]claimsRead, error) {
	out := map[sink.TopicPartition]claimsRead{}
	if len(parts) == 0 {
		return out, nil
	}
	q := fmt.Sprintf(`SELECT topic, "partition", count(*), max(claim) FROM %s WHERE topic IN (%s) GROUP BY topic, "partition"`,
		s.tables.fence, sqltext.QuoteAll(topicsOf(parts), sqltext.DatabendString))
	res, err := ss.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read the claims in %s: %w", s.opt.Table+"_fence", err)
	}
	for _, row := range res.Rows {
		// max(claim) is NULL where no row is numbered (max skips NULL:
		// functions/src/aggregates/aggregate_min_max_any.rs; sqllogictests
		// query/functions/02_0000_function_aggregate_min_max_any.test,
		// "group by test with all NULL rows in one group").
		var p, highest int64
		var c claimsRead
		ok := len(row) == 4 && row[0] != nil && row[1] != nil && row[2] != nil
		var errs [3]error
		if ok {
			p, errs[0] = strconv.ParseInt(*row[1], 10, 32)
			c.rows, errs[1] = strconv.ParseInt(*row[2], 10, 64)
			if row[3] != nil {
				highest, errs[2] = strconv.ParseInt(*row[3], 10, 64)
				c.past = highest + 1
			}
		}
		if !ok || errors.Join(errs[:]...) != nil || highest < 0 {
			return nil, fmt.Errorf("read the claims in %s: unexpected row %v", s.opt.Table+"_fence", deref(row))
		}
		if tp := (sink.TopicPartition{Topic: *row[0], Partition: int32(p)}); slices.Contains(parts, tp) {
			out[tp] = c
		}
	}
	return out, nil
}

// pruneEvery is how many loads a process commits between two prunes of
// the fence table (pruneClaims): each is one DELETE, and a partition
// keeps the claims committed since its highest the last prune read. A
// process prunes at its first committed load too (Open starts its count
// at pruneEvery-1): one that commits fewer than pruneEvery loads (run
// --exit-when-idle from a scheduler, restarts, receivers scaled in and
// out) would otherwise never prune, and the table would grow by a row
// per load and partition for ever. That first load's read holds every
// row committed since the last prune of anyone.
const pruneEvery = 16

// notePrunable keeps a load's read of its partitions' claims for the
// next prune (the latest read of each partition).
func (s *Sink) notePrunable(read map[sink.TopicPartition]claimsRead) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, c := range read {
		if c.past >= s.prunable[tp].past {
			s.prunable[tp] = c
		}
	}
}

// pruneClaims deletes, at the first load of this process and once every
// pruneEvery loads after it (see pruneEvery), the
// fence rows below the highest claim of each partition its loads read
// since the last prune: a read claim is committed, and a committed claim
// stays the highest or has a higher one above it, so the prune never
// deletes a partition's highest claim. It deletes only where the read's
// next number is one past its highest (rows <= past): then that number
// stays what a read gives after the prune, whose rows are fewer and
// whose highest is kept. A partition whose rows an older release
// numbered by counting them and added past its highest (claimsRead.next
// is their count) is pruned only once a numbered claim is above them.
// Every claim committed after the read is numbered past it, so no row
// the DELETE sees is a claim it must keep.
//
// The DELETE commits on its own, never in a load's transaction. A load
// then only appends to the fence table, and its COMMIT puts its segment
// in front of what the DELETE left (storages/fuse/src/retry/diff.rs,
// SegmentsDiff::apply); the DELETE's commit keeps the segments appended
// since its read (operations/common/generators/mutation_generator.rs,
// ModifiedSegmentExistsInLatest: the segments it rewrote are still
// there) and fails, UnresolvableConflict 4001, only where another
// commit rewrote them too (another process's prune, a compaction after a
// write: interpreters/hook/compact_hook.rs). That costs nothing but the
// prune, whose rows the next one deletes; in a load's transaction it
// would fail the load's COMMIT and run the whole load again.
func (s *Sink) pruneClaims(ctx context.Context) {
	s.mu.Lock()
	s.sincePrune++
	if s.sincePrune < pruneEvery {
		s.mu.Unlock()
		return
	}
	read := s.prunable
	s.prunable, s.sincePrune = map[sink.TopicPartition]claimsRead{}, 0
	s.mu.Unlock()
	q := pruneSQL(s.tables.fence, read)
	if q == "" || ctx.Err() != nil {
		return
	}
	if _, err := s.c.session().query(ctx, q); err != nil {
		// A conflict with another prune or a compaction is routine; any
		// other failure (a grant missing) leaves the table growing.
		level := slog.LevelWarn
		if isTransient(err) {
			level = slog.LevelInfo
		}
		s.log.Log(ctx, level, "pruning the claims below each partition's highest failed; the next prune deletes them", "table", s.opt.Table+"_fence", "err", err)
	}
}

// pruneSQL is the DELETE of the fence rows below the highest claim each
// read found, of the partitions where that keeps the next number (see
// pruneClaims); "" if there are none.
func pruneSQL(fence string, read map[sink.TopicPartition]claimsRead) string {
	parts := slices.SortedFunc(maps.Keys(read), func(a, b sink.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	var b strings.Builder
	for _, tp := range parts {
		c := read[tp]
		if c.past == 0 || c.rows <= 1 || c.rows > c.past {
			continue // nothing numbered, nothing below it, or not yet
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "DELETE FROM %s WHERE ", fence)
		} else {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, `(topic = %s AND "partition" = %d AND (claim < %d OR claim IS NULL))`, sqltext.DatabendString(tp.Topic), tp.Partition, c.past-1)
	}
	return b.String()
}

// storageNotFound is Databend's StorageNotFound (common/exception
// exception_code.rs; exception_into.rs maps opendal's NotFound to it): a
// COPY naming a file that is not in the stage (common/storage stage.rs,
// StageFilesInfo::list_files stats each named file).
const storageNotFound = 3001

// markerName is the staged name of tp's claim numbered n: the same for
// every process, whatever its load.compression (markers are always zstd;
// COPY's COMPRESSION = AUTO tells by the name). The topic is sanitized
// for a file name and hashed, so that two topics that sanitize alike
// never share a marker.
func markerName(tp sink.TopicPartition, n int64) string {
	h := fnv.New32a()
	h.Write([]byte(tp.Topic))
	return fmt.Sprintf("claim-%s-%08x-%d-%d.ndjson.zst", reUnsafe.ReplaceAllString(tp.Topic, "_"), h.Sum32(), tp.Partition, n)
}

var reUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// claim stages and copies the markers numbered by the claims this load's
// transaction read (claims) for the partitions it writes (ranges), each
// holding its number and the ledger position read (fence): see above. A
// marker skipped by the load history, or whose file a load that claimed
// it first removed (it committed, then purged), is a claim lost.
func (s *Sink) claim(ctx context.Context, ss *session, p *loadPlan, claims map[sink.TopicPartition]claimsRead, fence map[sink.TopicPartition]int64, ranges []sink.Range) error {
	if len(ranges) == 0 {
		return nil
	}
	targets := make([]target, len(ranges))
	errs := make([]error, len(ranges))
	var wg sync.WaitGroup
	for i, r := range ranges {
		after, ok := fence[r.TopicPartition]
		if !ok {
			after = -1
		}
		n := claims[r.TopicPartition].next()
		name := markerName(r.TopicPartition, n)
		targets[i] = target{name, 1}
		p.stagedMarker(name)
		// Uploaded at once (Options.Uploads bounds them): a load of many
		// partitions waits for one round trip, not one per partition.
		wg.Go(func() {
			row, err := json.Marshal(map[string]any{"topic": r.Topic, "partition": r.Partition, "after_offset": after, "claim": n})
			if err == nil {
				err = s.zstd.Compress(append(row, '\n'), func(compressed []byte) error { return s.upload(ctx, name, compressed) })
			}
			if err != nil {
				errs[i] = fmt.Errorf("upload the claim of %s past %d to %s: %w", r.TopicPartition, after, s.location(), err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	got, skipped, err := s.copyOnce(ctx, ss, s.tables.fence, targets, false)
	var ce *codeError
	switch {
	case errors.As(err, &ce) && ce.code == storageNotFound:
		// Not fatal (wrapping ce alone, not sink.ErrFatal): the
		// marker's claim was lost, which a fresh read tells.
		return &transientError{fmt.Errorf("claim the loaded positions: a marker was removed by the load that claimed it first; loading again from a fresh read: %w", ce)}
	case err != nil:
		return fmt.Errorf("claim the loaded positions: %w", err)
	case len(skipped) > 0:
		return &transientError{fmt.Errorf("claim the loaded positions: another load claimed %d of this load's partitions after its read; loading again from a fresh read", len(skipped))}
	}
	if err := checkCopied(s.tables.fence, targets, got); err != nil {
		return err
	}
	// A rejected marker row is no claim: committed, its marker would be
	// in the load history with no row counted, and every later load of
	// the partition would name it again and be skipped for ever.
	for _, t := range targets {
		if o := got[t.name]; o.errors > 0 {
			return fmt.Errorf("%w: %s rejected the claim %s (line %d): %s", sink.ErrFatal, s.opt.Table+"_fence", t.name, o.firstLine, o.firstError)
		}
	}
	return nil
}

// stagedMarker adds the claim marker name to the names this load
// staged, once.
func (p *loadPlan) stagedMarker(name string) {
	if !slices.Contains(p.markers, name) {
		p.staged = append(p.staged, name)
		p.markers = append(p.markers, name)
	}
}

// codeError is an error Databend answered a statement with, and its code.
type codeError struct {
	code int
	text string
}

func (e *codeError) Error() string { return e.text }
