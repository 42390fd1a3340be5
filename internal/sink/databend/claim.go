package databend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
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
// partition and the number of claims of it the fence table holds, read in
// the load's transaction before its ledger read. Claims commit one at a
// time in that numbering: two loads that read the same number name the
// same marker, and at most one of them commits; a load whose number a
// commit took after its read finds its marker in the load history (the
// history and the fence table commit together). Either way the load
// fails, retryable, and its retry reads both afresh. The number is read
// first because Databend reads a table the transaction has not written at
// its latest snapshot, statement by statement (session transaction.rs,
// get_table_from_buffer holds only mutated tables): any claim committed
// between the two reads took this load's number, so a ledger read newer
// than the number cannot slip through. A marker is never forced.
//
// The count, not the ledger position, names the claim: a partition
// started over (its topic recreated and its ledger rows deleted,
// docs/OPERATIONS.md) reads positions the old log's loads already
// claimed, whose markers the load history keeps. The fence table's rows
// must therefore never be deleted. The markers' content is the same for
// everyone naming them (an upload of a marker never changes what another
// load copies), and they are removed from the stage with the load's
// files.

// fenceColumns are the fence table's: one row per claimed position.
var fenceColumns = []column{
	{"topic", "VARCHAR", ""},
	{"partition", "INT", ""},
	{"after_offset", "BIGINT", ""},
}

// claimCounts reads, in the session ss, how many claims of each of parts
// the fence table holds (absent: none).
func (s *Sink) claimCounts(ctx context.Context, ss *session, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	if len(parts) == 0 {
		return map[sink.TopicPartition]int64{}, nil
	}
	q := fmt.Sprintf(`SELECT topic, "partition", count(*) FROM %s WHERE topic IN (%s) GROUP BY topic, "partition"`,
		s.tables.fence, sqltext.QuoteAll(topicsOf(parts), sqltext.DatabendString))
	res, err := ss.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read the claims in %s: %w", s.opt.Table+"_fence", err)
	}
	return partitionCounts(res, "the claims")
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

// claim stages and copies the markers numbered by the claim counts this
// load's transaction read (claims) for the partitions it writes (ranges),
// each holding the ledger position read (fence): see above. A marker
// skipped by the load history, or whose file a load that claimed it first
// removed (it committed, then purged), is a claim lost.
func (s *Sink) claim(ctx context.Context, ss *session, p *loadPlan, claims, fence map[sink.TopicPartition]int64, ranges []sink.Range) error {
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
		name := markerName(r.TopicPartition, claims[r.TopicPartition])
		targets[i] = target{name, 1}
		p.stagedOnce(name)
		// Uploaded at once (Options.Uploads bounds them): a load of many
		// partitions waits for one round trip, not one per partition.
		wg.Go(func() {
			row, err := json.Marshal(map[string]any{"topic": r.Topic, "partition": r.Partition, "after_offset": after})
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

// stagedOnce adds name to the names this load staged, once.
func (p *loadPlan) stagedOnce(name string) {
	for _, n := range p.staged {
		if n == name {
			return
		}
	}
	p.staged = append(p.staged, name)
}

// codeError is an error Databend answered a statement with, and its code.
type codeError struct {
	code int
	text string
}

func (e *codeError) Error() string { return e.text }
