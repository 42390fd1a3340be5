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
// DuplicatedUpsertFiles 2014). So each load claims, per partition it
// writes, the ledger position its transaction read: it copies a marker
// file named by the partition and that position into the fence table.
// Two loads that read the same position name the same marker, and at
// most one of them commits; the other fails, retryable, and its retry
// reads the ledger afresh. A load that read an older position than one
// committed meanwhile finds its marker in the history (the history and
// the ledger commit together), and fails likewise. The markers' content
// is the same for everyone naming them (an upload of a marker never
// changes what another load copies), and they are removed from the stage
// with the load's files.

// fenceColumns are the fence table's: one row per claimed position.
var fenceColumns = []column{
	{"topic", "VARCHAR", ""},
	{"partition", "INT", ""},
	{"after_offset", "BIGINT", ""},
}

// storageNotFound is Databend's StorageNotFound (common/exception
// exception_code.rs; exception_into.rs maps opendal's NotFound to it): a
// COPY naming a file that is not in the stage (common/storage stage.rs,
// StageFilesInfo::list_files stats each named file).
const storageNotFound = 3001

// markerName is the staged name of the claim of tp's ledger position
// after (-1: nothing loaded): the same for every process, whatever its
// load.compression (markers are always zstd; COPY's COMPRESSION = AUTO
// tells by the name). The topic is sanitized for a file name and hashed, so that
// two topics that sanitize alike never share a marker.
func markerName(tp sink.TopicPartition, after int64) string {
	h := fnv.New32a()
	h.Write([]byte(tp.Topic))
	return fmt.Sprintf("fence-%s-%08x-%d-%d.ndjson.zst", reUnsafe.ReplaceAllString(tp.Topic, "_"), h.Sum32(), tp.Partition, after)
}

var reUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// claim stages and copies the markers of the ledger positions this load's
// transaction read (fence) for the partitions it writes (ranges): see
// above. A marker whose file a load that claimed it first removed (it
// committed, then purged) is a claim lost too.
func (s *Sink) claim(ctx context.Context, ss *session, p *loadPlan, fence map[sink.TopicPartition]int64, ranges []sink.Range) error {
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
		name := markerName(r.TopicPartition, after)
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
	if _, err := s.copyFiles(ctx, ss, p, s.tables.fence, targets); err != nil {
		var ce *codeError
		if errors.As(err, &ce) && ce.code == storageNotFound {
			// Not fatal (wrapping ce alone, not sink.ErrFatal): the
			// marker's claim was lost, which a fresh read tells.
			return &transientError{fmt.Errorf("claim the ledger positions: a marker was removed by the load that claimed it first; loading again from a fresh read: %w", ce)}
		}
		return fmt.Errorf("claim the ledger positions: %w", err)
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
