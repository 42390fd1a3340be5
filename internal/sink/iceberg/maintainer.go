package iceberg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// Scheduled maintenance: what `tracelake compact`, `expire` and a manifest
// rewrite do by hand, done by a running process every interval
// (sink.iceberg.maintenance), and with a current day kept in check: the
// day partition loads are writing to is compacted as soon as it holds
// SmallFiles small files, not only once the day ended, so the partition
// people query never holds more than about SmallFiles plus one
// interval's loads of small files. Compacting it races the loads: they
// only add files, and a compaction commit is a replace that checks its
// files are unchanged (replaceFiles), re-read after each lost race.
//
// One process of a group does the work: a round first claims the
// maintenance lease, a property of the raw table committed through the
// catalog like any table change. The claim is advisory: the catalog
// offers no compare-and-swap of a property (it applies property updates
// to whatever metadata is current), so two processes claiming in the
// same instant can both run a round. That costs duplicated work, not
// data: every maintenance commit is a compare-and-swap of its own.

// maintenanceLeaseKey holds the lease: "<holder> <until, RFC 3339>".
const maintenanceLeaseKey = "tracelake.maintenance.lease"

// MaintenanceOptions configure scheduled maintenance.
type MaintenanceOptions struct {
	// TargetFileBytes is the size of compacted files.
	TargetFileBytes int64
	// SmallFiles is how many small files (under 3/4 of TargetFileBytes)
	// a day partition that has not ended may hold before it is compacted.
	SmallFiles int
	// ExpireOlderThan and RetainLast are expiry's: snapshots older than
	// ExpireOlderThan beyond the newest RetainLast are removed.
	ExpireOlderThan time.Duration
	RetainLast      int
	// Lease is how long a round's claim keeps other processes' rounds
	// away: a few intervals, so that the holder renews it every round
	// and another process takes over within Lease of its stopping.
	Lease time.Duration
	// Now is the clock deciding which days ended; nil is time.Now. The
	// week benchmark runs a simulated one.
	Now func() time.Time
	// OnRound, if set, is told each round Run ran and its error.
	OnRound func(MaintenanceRound, error)
}

// MaintenanceRound reports one round.
type MaintenanceRound struct {
	// HeldBy names the process holding the lease when this one's round
	// was skipped; empty when the round ran.
	HeldBy    string
	Compacted []Compaction
	Manifests []ManifestRewrite
	Expired   []Expiry
}

// Maintainer runs maintenance rounds for one process.
type Maintainer struct {
	s   *Sink
	opt MaintenanceOptions
	id  string // names this process in the lease
}

// NewMaintainer returns a Maintainer of s's tables.
func (s *Sink) NewMaintainer(opt MaintenanceOptions) *Maintainer {
	var b [4]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return &Maintainer{s: s, opt: opt, id: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))}
}

// Run runs a round every interval until ctx ends. A failed round is
// logged and the next one tries again.
func (m *Maintainer) Run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() {
		r, err := m.Round(ctx)
		if m.opt.OnRound != nil {
			m.opt.OnRound(r, err)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			m.s.log.Warn("iceberg maintenance round failed; the next one tries again", "in", interval, "err", err)
		case r.HeldBy != "":
			m.s.log.Debug("iceberg maintenance left to the lease's holder", "holder", r.HeldBy)
		}
	})
}

// Round claims the lease and, if it got it, declares the sort order of
// the span tables (sorted.go), compacts, rewrites the manifests and
// expires snapshots.
func (m *Maintainer) Round(ctx context.Context) (MaintenanceRound, error) {
	var r MaintenanceRound
	held, err := m.claim(ctx)
	if err != nil || held != "" {
		r.HeldBy = held
		return r, err
	}
	if err := m.s.declareLayout(ctx); err != nil {
		return r, err
	}
	settled := time.Now()
	if m.opt.Now != nil {
		settled = m.opt.Now()
	}
	pick := func(day int, g compaction.Group) bool {
		return dayEndedBy(g.Tasks, day, settled) || len(g.Tasks) >= m.opt.SmallFiles
	}
	if r.Compacted, err = m.s.compact(ctx, m.opt.TargetFileBytes, pick, false); err != nil {
		return r, err
	}
	// Expiry after the rewrite: it frees the manifests the rewrite and the
	// compaction replaced.
	if r.Manifests, err = m.s.RewriteManifests(ctx); err != nil {
		return r, err
	}
	r.Expired, err = m.s.Expire(ctx, m.opt.ExpireOlderThan, m.opt.RetainLast)
	return r, err
}

// claim takes or renews the lease and returns "", or returns the holder
// of a lease still valid.
func (m *Maintainer) claim(ctx context.Context) (string, error) {
	var held string
	err := m.s.retryLostRaces(ctx, m.s.raw, func(tbl *table.Table) (*table.Transaction, error) {
		held = ""
		if holder, until, ok := parseLease(tbl.Properties()[maintenanceLeaseKey]); ok && holder != m.id && time.Now().Before(until) {
			held = holder
			return tbl.NewTransaction(), nil // commits nothing
		}
		txn := tbl.NewTransaction()
		// A load committing in between makes this claim lose the race
		// and read the lease again, instead of the catalog replaying it.
		if err := txn.AssertRefSnapshotID(""); err != nil {
			return nil, err
		}
		lease := m.id + " " + time.Now().Add(m.opt.Lease).UTC().Format(time.RFC3339Nano)
		if err := txn.SetProperties(iceberggo.Properties{maintenanceLeaseKey: lease}); err != nil {
			return nil, err
		}
		return txn, nil
	})
	if err != nil || held != "" {
		return held, wrapClaim(err)
	}
	// Read back: of two claims committed in the same instant the later
	// one's holder is in the table, and the other process backs off.
	tbl, err := m.s.loadTable(ctx, m.s.raw)
	if err != nil {
		return "", wrapClaim(err)
	}
	if holder, _, _ := parseLease(tbl.Properties()[maintenanceLeaseKey]); holder != m.id {
		return holder, nil
	}
	return "", nil
}

func wrapClaim(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("claim the maintenance lease: %w", err)
}

func parseLease(v string) (holder string, until time.Time, ok bool) {
	holder, at, found := strings.Cut(v, " ")
	if !found {
		return "", time.Time{}, false
	}
	until, err := time.Parse(time.RFC3339Nano, at)
	return holder, until, err == nil
}
