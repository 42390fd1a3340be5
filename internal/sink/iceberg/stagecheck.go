package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// A staged batch's data files are in the tables' locations but in no
// snapshot until a load commits them: to `tracelake orphans` they look like
// a crashed writer's files, and a batch that waits past its grace period
// (a load retried through a catalog outage) can lose them. A commit must
// never add a file that is gone: every scan of the table would fail on it.

// checkStagedAfter is the age past which a staged batch's files are looked
// up before its commit. A younger file cannot have been deleted by
// `tracelake orphans`, which only deletes files older than its grace
// period, at least MinOrphanAge (1h); the 50 minutes between them absorb
// clock differences between this host, the store and the host running
// orphans. So the steady state costs nothing (a batch waits about one
// commit interval, 60s by default) or little (at the longest interval,
// 10m, a HEAD request per file of the batches that waited the whole
// interval), and a batch that waited longer, a load retried through a
// catalog outage, the very case orphan cleanup can hit, gets one HEAD
// request per file (in each of its tables) on every attempt.
const checkStagedAfter = 10 * time.Minute

// checkStaged looks up the files of the batches of entries that were
// staged checkStagedAfter ago or longer, in every table a commit of theirs
// has not landed in yet, before the group's first commit. A file gone
// where the table's positions do not cover its batch yet (no commit adds
// a covered batch's files) fails the group with sink.ErrFatal,
// and its batch is forgotten (its other files deleted) so that nothing
// commits it later: the records are read again from Kafka after the
// restart. Failing the whole group rather than leaving the batch out
// keeps a later batch of the same partition from committing past the
// lost one. A lookup that fails otherwise is an error to retry.
func (s *Sink) checkStaged(ctx context.Context, entries []*staged) error {
	now := time.Now()
	for _, k := range s.kinds() {
		var fsys icebergio.IO
		for _, st := range entries {
			// Files a commit of this load added (an earlier attempt's, of
			// a table committed before a later one failed) are the
			// table's: maintenance may have compacted them and expired
			// the snapshots that held them, and this load commits them
			// no more (commitTable finds them landed).
			if now.Sub(st.at) < checkStagedAfter || len(st.of(k).files) == 0 || st.of(k).landed {
				continue
			}
			if fsys == nil {
				var err error
				if _, fsys, err = s.tableFS(ctx, k); err != nil {
					return fmt.Errorf("check the staged files of %s: %w", name(s.id(k)), err)
				}
			}
			for _, df := range st.of(k).files {
				err := exists(fsys, df.FilePath())
				if errors.Is(err, fs.ErrNotExist) {
					// Covered by the table's positions, the files are
					// committed no more (commitTable counts them as this
					// load's, an earlier attempt's commit whose reply was
					// lost, or drops them as fenced): gone, they may be
					// that commit's, since compacted away.
					if cov, err := s.coveredIn(ctx, k, st); err != nil || cov {
						if err != nil {
							return fmt.Errorf("check the staged files of %s: %w", name(s.id(k)), err)
						}
						break
					}
					batch := s.forget(ctx, st)
					return fmt.Errorf("%w: staged file %s of batch %s (table %s, staged %s ago) is gone, most likely deleted by `tracelake orphans` while the batch waited for its commit: "+
						"nothing of the load was committed, and its records are read again from Kafka",
						sink.ErrFatal, df.FilePath(), batch, name(s.id(k)), now.Sub(st.at).Round(time.Second))
				}
				if err != nil {
					return fmt.Errorf("check staged file %s: %w", df.FilePath(), err)
				}
			}
		}
	}
	return nil
}

// coveredIn reports whether table k's positions, read again, cover every
// range of st: no commit adds its files to the table any more.
func (s *Sink) coveredIn(ctx context.Context, k kind, st *staged) (bool, error) {
	tbl, err := s.loadTable(ctx, s.id(k))
	if err != nil {
		return false, err
	}
	pos, err := positions(tbl)
	if err != nil {
		return false, err
	}
	return covered(st.ranges, pos) == coversAll, nil
}

// exists reports nil if path exists, an error wrapping fs.ErrNotExist if
// it does not: one HEAD request on S3.
func exists(fsys icebergio.IO, path string) error {
	if st, ok := fsys.(icebergio.StatIO); ok {
		_, err := st.Stat(path)
		return err
	}
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// forget drops a kept batch: no later load can commit it, and its files
// that remain are deleted. It returns the batch's name.
func (s *Sink) forget(ctx context.Context, st *staged) string {
	var batch string
	s.mu.Lock()
	for n, kept := range s.kept {
		if kept == st {
			batch = n
			delete(s.kept, n)
		}
	}
	s.mu.Unlock()
	s.drop(ctx, st)
	return batch
}

// tableFS is table k (as last read) and its file system.
func (s *Sink) tableFS(ctx context.Context, k kind) (*table.Table, icebergio.IO, error) {
	return s.tableFSOf(ctx, s.id(k))
}

// tableFSOf is table id (as last read) and its file system.
func (s *Sink) tableFSOf(ctx context.Context, id table.Identifier) (*table.Table, icebergio.IO, error) {
	tbl, err := s.table(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	return tbl, fsys, nil
}
