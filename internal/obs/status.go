package obs

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// History is how far back the status page charts go.
const History = 15 * time.Minute

// maxErrors is how many of the last warnings and errors the page keeps.
const maxErrors = 20

// PartitionStatus is one partition owned by this process, as the status
// page shows it. Offsets are -1 while unknown.
type PartitionStatus struct {
	Topic     string
	Partition int32
	Worker    int   // -1: the receivers' direct loads (otlp.mode load)
	Next      int64 // next offset to load: the ledger's position
	Committed int64 // last offset this process committed to the group
	HWM       int64 // high watermark of the last fetch
	LastLoad  time.Time
}

// Lag is the high watermark minus the next offset to load, or -1 while
// either is unknown.
func (p PartitionStatus) Lag() int64 {
	if p.HWM < 0 || p.Next < 0 {
		return -1
	}
	return p.HWM - p.Next
}

// Snapshot is the state of the process at one moment.
type Snapshot struct {
	Partitions     []PartitionStatus
	Consumed       int64 // records read since start
	Loaded, DLQ    int64 // rows loaded since start
	InflightBytes  int64
	InflightBudget int64
}

// totalLag sums the known lags.
func (s Snapshot) totalLag() int64 {
	var lag int64
	for _, p := range s.Partitions {
		lag += max(p.Lag(), 0)
	}
	return lag
}

// Sample is one point of the charts.
type Sample struct {
	At               time.Time
	Consumed, Loaded int64 // cumulative
	Lag              int64
}

// LoggedError is a warning or error that was logged.
type LoggedError struct {
	At    time.Time
	Level string
	Text  string
}

// Status keeps what the status page shows: the live state (from the source
// the pipeline sets), samples of the last 15 minutes and the last errors.
// Safe for concurrent use.
type Status struct {
	info    [][2]string // label, value: what this process runs
	links   [][2]string // label, path: pages beside the status page
	live    []liveField // header fields read at each render
	started time.Time

	mu      sync.Mutex
	sources []func() Snapshot
	samples []Sample
	errors  []LoggedError
	models  map[string]ModelStatus
	commits map[string]TableCommits
}

// TableCommits are a table's catalog commits since start (Iceberg loads).
type TableCommits struct {
	Table                      string
	Commits, Conflicts, Failed int64 // landed; lost to another writer; failed otherwise
	LastTook, MaxTook          time.Duration
	Last                       time.Time // of the last attempt
	Snapshots                  int64     // in the table's metadata after the last commit
	MetadataBytes              int64     // size of its metadata file, last measured
}

// CommitAttempt is one catalog commit of a table, as AddCommit takes it.
type CommitAttempt struct {
	Table            string
	Took             time.Duration
	Conflict, Failed bool
	Snapshots        int64 // 0: unknown
	MetadataBytes    int64 // 0: not measured this time
}

// AddCommit records a catalog commit of a table.
func (s *Status) AddCommit(c CommitAttempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.commits == nil {
		s.commits = map[string]TableCommits{}
	}
	t := s.commits[c.Table]
	t.Table, t.Last, t.LastTook, t.MaxTook = c.Table, time.Now(), c.Took, max(t.MaxTook, c.Took)
	switch {
	case c.Conflict:
		t.Conflicts++
	case c.Failed:
		t.Failed++
	default:
		t.Commits++
	}
	if c.Snapshots > 0 {
		t.Snapshots = c.Snapshots
	}
	if c.MetadataBytes > 0 {
		t.MetadataBytes = c.MetadataBytes
	}
	s.commits[c.Table] = t
}

// Commits returns the tables' catalog commits, by table.
func (s *Status) Commits() []TableCommits {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.commits))
	slices.SortFunc(out, func(a, b TableCommits) int { return cmp.Compare(a.Table, b.Table) })
	return out
}

// ModelStatus is the last merge of a model (merge.every).
type ModelStatus struct {
	Name                    string
	At                      time.Time // of the last attempt
	Read, Changed, Rejected int64     // of the last successful merge
	Took                    time.Duration
	LastSuccess             time.Time
	Err                     string // of the last attempt, "" if it succeeded
}

// SetModel records a merge attempt of a model.
func (s *Status) SetModel(m ModelStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.models == nil {
		s.models = map[string]ModelStatus{}
	}
	if prev, ok := s.models[m.Name]; ok && m.Err != "" {
		// A failure keeps the figures of the last success.
		m.Read, m.Changed, m.Rejected, m.Took, m.LastSuccess = prev.Read, prev.Changed, prev.Rejected, prev.Took, prev.LastSuccess
	}
	s.models[m.Name] = m
}

// Models returns the models' last merges, by name.
func (s *Status) Models() []ModelStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ModelStatus, 0, len(s.models))
	for _, m := range s.models {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b ModelStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// AddLink shows a link to another page of this server on the status page.
// Call it before serving.
func (s *Status) AddLink(label, path string) { s.links = append(s.links, [2]string{label, path}) }

// liveField is a header field whose value changes while the process runs.
type liveField struct {
	label string
	value func() string
}

// AddLive shows a header field whose value value gives at each render of
// the page (the Iceberg sink's S3 request counts). Call it before serving.
func (s *Status) AddLive(label string, value func() string) {
	s.live = append(s.live, liveField{label, value})
}

// header is the page's header fields: the fixed ones, then the live ones.
func (s *Status) header() [][2]string {
	out := slices.Clone(s.info)
	for _, f := range s.live {
		out = append(out, [2]string{f.label, f.value()})
	}
	return out
}

// NewStatus creates a status with header fields (label, value pairs such as
// group and topics). Never pass secrets: the page shows them as given.
func NewStatus(info ...[2]string) *Status {
	return &Status{info: info, started: time.Now()}
}

// AddSource adds a source of the live state: the pipeline's workers, the
// receivers' direct loads. The page shows their sum.
func (s *Status) AddSource(src func() Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources = append(s.sources, src)
}

// Snapshot returns the live state of every source, partitions sorted by
// topic and number.
func (s *Status) Snapshot() Snapshot {
	s.mu.Lock()
	sources := slices.Clone(s.sources)
	s.mu.Unlock()
	var snap Snapshot
	for _, src := range sources {
		one := src()
		snap.Partitions = append(snap.Partitions, one.Partitions...)
		snap.Consumed += one.Consumed
		snap.Loaded += one.Loaded
		snap.DLQ += one.DLQ
		snap.InflightBytes += one.InflightBytes
		snap.InflightBudget += one.InflightBudget
	}
	slices.SortFunc(snap.Partitions, func(a, b PartitionStatus) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return snap
}

// Sample records a chart point at now and forgets points older than History.
func (s *Status) Sample(now time.Time) {
	snap := s.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, Sample{At: now, Consumed: snap.Consumed, Loaded: snap.Loaded + snap.DLQ, Lag: snap.totalLag()})
	cut := 0
	for cut < len(s.samples) && now.Sub(s.samples[cut].At) > History {
		cut++
	}
	s.samples = slices.Delete(s.samples, 0, cut)
}

// SampleEvery samples until ctx ends.
func (s *Status) SampleEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	s.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Sample(now)
		}
	}
}

// Samples returns a copy of the chart points, oldest first.
func (s *Status) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// keepError remembers a logged warning or error, dropping the oldest.
func (s *Status) keepError(e LoggedError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errors) == maxErrors {
		s.errors = slices.Delete(s.errors, 0, 1)
	}
	s.errors = append(s.errors, e)
}

// Errors returns the last warnings and errors, newest first.
func (s *Status) Errors() []LoggedError {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.errors)
	slices.Reverse(out)
	return out
}
