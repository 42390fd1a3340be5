package iceberg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	pathpkg "path"
	"strings"
	"sync"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// Staged files and orphan cleanup. A staged batch's data files are in the
// tables' locations but in no snapshot until a load commits them, so to
// `tracelake orphans` they look like the files of a crashed writer; so do
// the files a compaction, a dedup merge or a rebuild of the derived table
// writes until it commits them, and compacting a whole day (or rebuilding
// every derived row) can take longer than the grace period. Two
// guards keep a commit from adding a file orphan cleanup deleted:
//
//   - A lease: while a Sink has staged files (or a compaction's
//     uncommitted output), it writes, every leaseInterval, one file per
//     table under the table's location,
//     <location>/tracelake-staging/<id>.json, listing the files it staged
//     (or wrote) there and has not committed or discarded. RemoveOrphans reads the
//     leases written within leaseStaleAfter and keeps the files they list;
//     older leases (a process that died, or cannot reach the store) are
//     ignored and deleted. iceberg-go's orphan cleanup walks the whole
//     table location, leases included: a live lease is never older than
//     leaseInterval, far younger than any grace period (MinOrphanAge), so
//     it is never taken for an orphan; a dead process's is, in time.
//   - A check before committing (checkStaged): a batch that waited long
//     enough for orphan cleanup to have judged it has its files looked up
//     before the group's first commit; a file gone fails the whole group
//     with sink.ErrFatal, so the run stops and the records are read again
//     from Kafka, instead of a commit adding a file every scan then fails
//     on.
//
// The lease makes the grace period a safety margin; the check covers what
// the lease cannot (a lease that lapsed while the store was unreachable,
// another tool's cleanup).

const (
	// leaseInterval is how often a Sink with staged files rewrites its
	// leases: well under MinOrphanAge, so a file is listed in a fresh
	// lease long before any orphan cleanup may judge it.
	leaseInterval = 5 * time.Minute
	// leaseStaleAfter is the age (by the store's modification time, the
	// clock orphan cleanup judges files by, against the clock of the host
	// running it) past which a lease is a dead process's: five rewrites
	// missed, which tolerates 25 minutes of skew between the two clocks
	// and stays under MinOrphanAge, so a dead process's files wait no
	// longer than their grace period.
	leaseStaleAfter = 6 * leaseInterval
	// leaseDir is the leases' directory under a table's location.
	leaseDir = "tracelake-staging"
)

// leases are a Sink's staging leases.
type leases struct {
	start  sync.Once
	cancel context.CancelFunc // stops the renewal loop
	done   chan struct{}      // closed when the loop has stopped

	mu      sync.Mutex              // serialises renewals and Close
	id      string                  // names this Sink's leases
	written map[string]writtenLease // the leases written, by table name; nil until started
	closed  bool
}

// writtenLease is a lease written, of table id.
type writtenLease struct {
	id   table.Identifier
	path string
}

// leased are the files a lease of table id lists.
type leased struct {
	id    table.Identifier
	files []string
}

// leaseFile is a lease's content.
type leaseFile struct {
	Host  string   `json:"host"`
	PID   int      `json:"pid"`
	Files []string `json:"files"` // the staged data files, as their DataFile paths
}

// startLeases starts renewing the leases (once; Stage calls it): only a
// Sink that stages has any, and only Close stops them.
func (s *Sink) startLeases() {
	s.lease.start.Do(func() {
		var b [8]byte
		_, _ = rand.Read(b[:])
		ctx, cancel := context.WithCancel(context.Background())
		s.lease.mu.Lock()
		s.lease.id, s.lease.written = hex.EncodeToString(b[:]), map[string]writtenLease{}
		s.lease.cancel, s.lease.done = cancel, make(chan struct{})
		s.lease.mu.Unlock()
		go s.renewLoop(ctx)
	})
}

func (s *Sink) renewLoop(ctx context.Context) {
	defer close(s.lease.done)
	every(ctx, leaseInterval, func() {
		rctx, cancel := context.WithTimeout(ctx, leaseInterval)
		err := s.renewLeases(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			// The next tick tries again; until then the lease written
			// last still holds (leaseStaleAfter), and the check before
			// committing covers a lease that lapsed.
			s.log.Warn("could not write the staging leases that keep tracelake orphans off this process's staged files; retrying",
				"in", leaseInterval, "err", err)
		}
	})
}

// every calls f every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}

// renewLeases writes each table's lease listing its staged files, and
// removes the lease of a table with none staged any more.
func (s *Sink) renewLeases(ctx context.Context) error {
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	if s.lease.closed || s.lease.written == nil {
		return nil
	}
	staged := s.stagedPaths()
	host, _ := os.Hostname()
	var errs []error
	for tn, had := range s.lease.written {
		if _, ok := staged[tn]; ok {
			continue
		}
		if err := s.removeLease(ctx, had.id, had.path); err != nil {
			errs = append(errs, fmt.Errorf("remove lease %s: %w", had.path, err))
			continue
		}
		delete(s.lease.written, tn)
	}
	for tn, l := range staged {
		path, err := s.writeLease(ctx, l.id, leaseFile{Host: host, PID: os.Getpid(), Files: l.files})
		if err != nil {
			errs = append(errs, fmt.Errorf("write the staging lease of %s: %w", tn, err))
			continue
		}
		s.lease.written[tn] = writtenLease{l.id, path}
	}
	return errors.Join(errs...)
}

// closeLeases stops the renewals and removes the leases: the process's
// files that are still staged are orphans from now on.
func (s *Sink) closeLeases() {
	s.lease.mu.Lock()
	started := s.lease.written != nil
	s.lease.mu.Unlock()
	if !started {
		return
	}
	s.lease.cancel()
	<-s.lease.done
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	if s.lease.closed {
		return
	}
	s.lease.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range s.lease.written {
		if err := s.removeLease(ctx, l.id, l.path); err != nil {
			s.log.Warn("could not remove a staging lease; tracelake orphans ignores it once stale", "lease", l.path, "err", err)
		}
	}
}

// writeLease writes this Sink's lease of table id and returns its path.
func (s *Sink) writeLease(ctx context.Context, id table.Identifier, lf leaseFile) (string, error) {
	tbl, fsys, err := s.tableFSOf(ctx, id)
	if err != nil {
		return "", err
	}
	w, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return "", fmt.Errorf("the warehouse's file system (%T) cannot write files", fsys)
	}
	data, err := json.Marshal(lf)
	if err != nil {
		return "", err
	}
	path := leasePath(tbl.Location(), s.lease.id)
	return path, w.WriteFile(path, data)
}

// removeLease removes the lease at path of table id.
func (s *Sink) removeLease(ctx context.Context, id table.Identifier, path string) error {
	_, fsys, err := s.tableFSOf(ctx, id)
	if err != nil {
		return err
	}
	return removeFile(fsys, path)
}

// stagedPaths lists the files of the batches kept and the compactions'
// uncommitted output, by table name.
func (s *Sink) stagedPaths() map[string]*leased {
	out := map[string]*leased{}
	add := func(id table.Identifier, paths ...string) {
		if len(paths) == 0 {
			return
		}
		l := out[name(id)]
		if l == nil {
			l = &leased{id: id}
			out[name(id)] = l
		}
		l.files = append(l.files, paths...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Each entry once: a stream's entry is kept under each of its
	// batches' names, and an open one is its stream's before its first
	// batch is kept.
	entries := map[*staged]bool{}
	for _, st := range s.kept {
		entries[st] = true
	}
	s.writing.Lock()
	defer s.writing.Unlock()
	for _, e := range s.streams {
		entries[e.st] = true
	}
	for st := range entries {
		for _, k := range s.kinds() {
			sf := st.of(k)
			for _, df := range sf.files {
				add(s.id(k), df.FilePath())
			}
			add(s.id(k), unfinished(sf.files, sf.creating)...)
		}
		if st.doubt != nil {
			// Dead letters waiting for the main table's commit
			// (indoubt.go).
			for _, df := range st.doubt.late.files {
				add(s.dlq, df.FilePath())
			}
		}
	}
	for c := range s.compacting {
		add(c.id, c.files...)
	}
	return out
}

// setFiles replaces a staged batch's files of one table: under s.mu, which
// the lease renewal reads them under.
func (s *Sink) setFiles(sf *stagedFiles, files []iceberggo.DataFile, counts map[sink.TopicPartition]int64) {
	s.mu.Lock()
	sf.files, sf.counts = files, counts
	s.mu.Unlock()
}

func leasePath(location, id string) string {
	return strings.TrimSuffix(location, "/") + "/" + leaseDir + "/" + id + ".json"
}

// readLeases reads the leases under tbl's location and returns the files
// the fresh ones list, by fileKey. Stale leases are ignored, and deleted
// unless dryRun.
func (s *Sink) readLeases(ctx context.Context, tbl *table.Table, dryRun bool) (map[string]bool, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	listable, ok := fsys.(icebergio.ListableIO)
	if !ok {
		return nil, fmt.Errorf("the warehouse's file system (%T) cannot list files", fsys)
	}
	type found struct {
		path string
		at   time.Time
	}
	var leases []found
	dir := strings.TrimSuffix(tbl.Location(), "/") + "/" + leaseDir
	err = listable.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // no process ever staged here
		case err != nil:
			return err
		case d.IsDir() || !strings.HasSuffix(path, ".json"):
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		leases = append(leases, found{path, info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the staging leases in %s: %w", dir, err)
	}
	staged := map[string]bool{}
	for _, l := range leases {
		if age := time.Since(l.at); age > leaseStaleAfter {
			s.log.Info("ignoring a stale staging lease: its process stopped renewing it", "lease", l.path, "age", age.Round(time.Second))
			if !dryRun {
				if err := removeFile(fsys, l.path); err != nil {
					s.log.Warn("could not delete a stale staging lease", "lease", l.path, "err", err)
				}
			}
			continue
		}
		var lf leaseFile
		data, err := readAll(fsys, l.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since listed: its process closed
		}
		if err == nil {
			err = json.Unmarshal(data, &lf)
		}
		if err != nil {
			// Deleting without knowing what a live process staged would
			// be the very loss the lease is for.
			return nil, fmt.Errorf("read staging lease %s (its process may be rewriting it: run again): %w", l.path, err)
		}
		for _, f := range lf.Files {
			staged[fileKey(f)] = true
		}
	}
	return staged, nil
}

func readAll(fsys icebergio.IO, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// fileKey is how a data file's path (a DataFile's, file:// on a local
// warehouse) and the same file's path as orphan cleanup lists it (a plain
// path on a local warehouse) are matched.
func fileKey(path string) string {
	if strings.HasPrefix(path, "file:") {
		if u, err := url.Parse(path); err == nil && u.Path != "" {
			return pathpkg.Clean(u.Path)
		}
	}
	return path
}
