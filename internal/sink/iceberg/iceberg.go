// Package iceberg is the Apache Iceberg sink: the raw and dead-letter
// tables are Iceberg tables in a SQL catalog, written as Parquet by
// iceberg-go. There is no ledger table: each table's positions (the next
// offset per partition) are table properties, one per partition, committed
// in the same metadata commit as the data; a load's snapshot summary
// records its load id and the positions it set.
//
// The SQL catalog commits one table at a time, so the two tables cannot
// commit together. Each is fenced by its own positions instead: a load
// commits the dead-letter rows past the dead-letter table's positions,
// then the raw rows past the raw table's positions together with the
// positions of every partition of the load. The raw table's positions are
// where consumption resumes; a load retried after a failure between the
// two commits finds its dead-letter rows already there and skips them.
//
// Batches are written as data files when staged (load.go); a load commits
// them, fenced by the positions at commit time, and the loads that a
// process's workers make at the same moment share one commit, so a table
// gets a snapshot per commit interval, not per batch.
package iceberg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest" // http(s):// catalogs
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for a PostgreSQL catalog
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// PositionKeyPrefix begins the table properties holding a table's
// positions, one per partition: tracelake.position.<topic>.<partition> is
// the partition's next offset. One property per partition because the
// catalog applies a commit's properties over the table's current ones:
// commits touching different partitions never reset each other's. A
// load's snapshot summary holds the properties it set.
const PositionKeyPrefix = "tracelake.position."

// legacyPositionsKey is the property that held all positions as one JSON
// list of {topic, partition, next} before: still read, and replaced by
// the per-partition properties in the next load's commit.
const legacyPositionsKey = "tracelake.positions"

// loadIDKey is the snapshot summary property naming the load.
const loadIDKey = "tracelake.load-id"

// loadKeyPrefix begins the table properties naming, per partition, the
// load whose commit last moved its position:
// tracelake.load.<topic>.<partition> = its load id. A load whose commit
// had an unknown outcome finds it by them when its retry comes after
// snapshot expiry removed the snapshot that named it (committedBy).
const loadKeyPrefix = "tracelake.load."

func loadKey(tp sink.TopicPartition) string {
	return loadKeyPrefix + tp.Topic + "." + strconv.Itoa(int(tp.Partition))
}

// topicIDKeyPrefix begins the main table's properties holding Kafka's id
// of the topic each partition's position was loaded from
// (sink.Range.TopicID): tracelake.topic-id.<topic>.<partition>, set by the
// loads that move the partition's position, beside it (and in their
// snapshot summary). One per partition, as the positions: a topic
// deleted and recreated has partitions loaded from the new topic (one
// the old never filled, or one started over) while the others' positions
// are still the old topic's, and an id of the topic set by the former
// made the latter pass the check. A partition without it (loaded only
// before it existed) is not checked.
const topicIDKeyPrefix = "tracelake.topic-id."

func topicIDKey(tp sink.TopicPartition) string {
	return topicIDKeyPrefix + tp.Topic + "." + strconv.Itoa(int(tp.Partition))
}

// TopicIDs returns the topic id the main table records for each of parts
// (sink.TopicIDKeeper).
func (s *Sink) TopicIDs(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]string, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	props := tbl.Properties()
	out := map[sink.TopicPartition]string{}
	for _, tp := range parts {
		if id := props[topicIDKey(tp)]; id != "" {
			out[tp] = id
		}
	}
	return out, nil
}

// setTopicIDs sets, in txn, the topic id of each partition of ranges that
// has one and that props (the table's) do not hold already, and adds them
// to summary.
func setTopicIDs(txn *table.Transaction, props, summary iceberggo.Properties, ranges []sink.Range) error {
	set := iceberggo.Properties{}
	for _, r := range ranges {
		if k := topicIDKey(r.TopicPartition); r.TopicID != "" && props[k] != r.TopicID {
			set[k] = r.TopicID
		}
	}
	if len(set) == 0 {
		return nil
	}
	maps.Copy(summary, set)
	return txn.SetProperties(set)
}

// Options configure a Sink.
type Options struct {
	// Catalog is the SQL catalog's database: a SQLite file (one machine),
	// or a postgres:// URL (the catalog of many instances); or the
	// http(s):// URL of a REST catalog.
	Catalog   string
	Warehouse string // directory of the tables' files (SQL catalogs)
	REST      REST
	Namespace string
	Table     string // raw table; <table>_dlq beside it
	// Adopt accepts an existing table with data but no positions.
	Adopt bool
	// CatalogName names the catalog (a SQL catalog stores it with each
	// table). Default tracelake.
	CatalogName string
	// TableProperties are set on created tables over tableProperties.
	TableProperties map[string]string
	// PartitionBy is a JSON path of the value holding the event time
	// (event_time, the raw table's partition day); "" for the record's
	// Kafka timestamp.
	PartitionBy string
	// Typed, when set, is the declared table whose rows (NDJSON) the
	// batches carry instead of raw records (OTLP spans, logs, points):
	// Table is created with its columns, partitioned by tenant and day.
	Typed *schema.Table
	// Derived, with a Typed table, is the table of the batches' Derived
	// rows (genai_operations), named DerivedTable: created like the typed
	// table and committed with each load before it, fenced by its own
	// positions as the dead-letter table is.
	Derived      *schema.Table
	DerivedTable string
	// DedupTable, with a Typed table, is its dedup model's target (see
	// Dedup): created by Prepare, maintained with the other tables.
	DedupTable string
	// S3 reaches an s3:// warehouse.
	S3  S3
	Log *slog.Logger
	// OnCommit, if set, is told of each load's catalog commit (metrics).
	OnCommit func(CommitStats)
	// TargetFileBytes is the size at which a worker's open data files roll
	// when the table sets no write.target-file-size-bytes: the
	// compaction's target (sink.iceberg.maintenance.target_file_size), so
	// that compaction finds the load's files full. 0: 128 MiB.
	TargetFileBytes int64
	// GroupWait is how long a load waits for the loads of other workers
	// of the process to join its commit: with the workers' loads aligned
	// to the same moments (the commit interval), one commit per interval
	// takes them all. 0 commits each load at once.
	GroupWait time.Duration
}

// CommitStats describe one load's catalog commit.
type CommitStats struct {
	Table    string
	Took     time.Duration
	Conflict bool // lost to another writer's commit: nothing committed, the load is retried
	Failed   bool // failed otherwise (the catalog failed): the outcome is unknown, the load is retried
	// After a commit that landed: the snapshots the table's metadata
	// holds, and the size of its metadata file (read at most once a
	// minute per table; 0 when not read or unreadable), both rewritten
	// and read on every commit, so they must stay small.
	Snapshots     int
	MetadataBytes int64
}

// REST authenticates to a REST catalog and names its warehouse (the
// catalog decides where tables' files go): a bearer Token, or OAuth2
// client Credential exchanged for one (with Scope, at OAuth2ServerURI
// when that is not the catalog's own endpoint); or AWS SigV4 signing.
type REST struct {
	Credential, Token, Warehouse, Scope, OAuth2ServerURI string
	SigV4                                                bool
	SigV4Region, SigV4Service                            string
}

// S3 is an S3-compatible store; empty fields fall back to the AWS SDK's
// usual sources.
type S3 struct{ Endpoint, Region, AccessKeyID, SecretAccessKey string }

// Sink writes to the Iceberg tables. Commits are serialised in the process
// (commits to one table would only conflict with each other); a commit
// that loses to another process is an error the pipeline retries, and the
// retry reloads the table and its positions.
type Sink struct {
	opt Options
	cat catalog.Catalog
	log *slog.Logger
	raw table.Identifier
	dlq table.Identifier
	// derived is the derived table (Options.Derived), with its schema.
	derived       table.Identifier
	derivedSchema *iceberggo.Schema
	// eventAt reads each raw row's event_time.
	eventAt eventTimer
	// typed is the declared table's schema (Options.Typed), nil for raw.
	typed *iceberggo.Schema
	// commitMu serialises the process's commits (see commitTable).
	commitMu sync.Mutex
	// sizedAt is when each table's metadata file size was last read for
	// OnCommit (guarded by commitMu).
	sizedAt map[string]time.Time
	// branches are the tables' branches as this process last checked
	// them for a rollback (rollback.go; guarded by commitMu).
	branches map[string]*branchState
	// recovering are the partitions of the dead-letter and derived
	// tables that read records again for rows a rollback of that table
	// alone dropped (rollback_recover.go; guarded by recoverMu).
	recovering map[kind]map[sink.TopicPartition]int64
	recoverMu  sync.Mutex

	mu   sync.Mutex
	kept map[string]*staged // staged batches by name, until committed or discarded
	// committedEarly are batches committed with an earlier load, written
	// into its files while it began (open.go), until their own load.
	committedEarly map[string]*earlyRows
	tables         map[string]*table.Table // each table as last read, for staging
	// compacting are the files running compactions and dedup merges
	// wrote and have not committed, by writer: leased as staged files are
	// (lease.go).
	compacting map[*leased]bool

	// group gathers concurrent loads into one commit (see Load).
	group struct {
		sync.Mutex
		queue   []*loadRequest
		leading bool
	}

	// lease keeps orphan cleanup off the staged files (lease.go).
	lease leases

	// The streams' open writers (open.go).
	writing     sync.Mutex
	streams     map[string]*openEntry // by sink.Batch.Stream
	writerBytes int64                 // a stream's writers' memory
	// writeCtx is the open writers' context, canceled by Close.
	writeCtx    context.Context
	stopWriting context.CancelFunc

	// Tests: make a load or a maintenance commit lose a race.
	beforeLoadCommit, beforeMaintenanceCommit, beforeDedupCommit func()
	beforeRebuildCommit                                          func()
	beforeCatalogCommit                                          func(table string)
}

// Open opens (or creates) the catalog.
func Open(ctx context.Context, opt Options) (*Sink, error) {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	props, err := catalogProps(opt)
	if err != nil {
		return nil, err
	}
	if opt.CatalogName == "" {
		opt.CatalogName = "tracelake"
	}
	eventAt, err := newEventTimer(opt.PartitionBy)
	if err != nil {
		return nil, fmt.Errorf("partition_by: %w", err)
	}
	cat, err := catalog.Load(ctx, opt.CatalogName, props)
	if err != nil {
		return nil, fmt.Errorf("open iceberg catalog: %w", err)
	}
	var typed *iceberggo.Schema
	if opt.Typed != nil {
		typed = typedSchema(opt.Typed)
	}
	if (opt.Derived != nil) != (opt.Typed != nil && opt.DerivedTable != "") {
		return nil, errors.New("BUG: a derived table needs a typed table and a name")
	}
	var derived table.Identifier
	var derivedSchema *iceberggo.Schema
	if opt.Derived != nil {
		derived, derivedSchema = table.Identifier{opt.Namespace, opt.DerivedTable}, typedSchema(opt.Derived)
	}
	writeCtx, stopWriting := context.WithCancel(context.Background())
	return &Sink{
		committedEarly: map[string]*earlyRows{},
		streams:        map[string]*openEntry{},
		writerBytes:    defaultWriterBytes,
		writeCtx:       writeCtx,
		stopWriting:    stopWriting,
		derived:        derived,
		derivedSchema:  derivedSchema,
		opt:            opt,
		typed:          typed,
		cat:            cat,
		log:            opt.Log,
		raw:            table.Identifier{opt.Namespace, opt.Table},
		dlq:            table.Identifier{opt.Namespace, opt.Table + "_dlq"},
		eventAt:        eventAt,
		kept:           map[string]*staged{},
		tables:         map[string]*table.Table{},
		sizedAt:        map[string]time.Time{},
	}, nil
}

// catalogProps are iceberg-go's catalog properties for opt.
func catalogProps(opt Options) (iceberggo.Properties, error) {
	props := iceberggo.Properties{}
	for k, v := range map[string]string{
		icebergio.S3EndpointURL: opt.S3.Endpoint, icebergio.S3Region: opt.S3.Region,
		icebergio.S3AccessKeyID: opt.S3.AccessKeyID, icebergio.S3SecretAccessKey: opt.S3.SecretAccessKey,
		// REST only (iceberg-go's catalog/rest property names):
		"credential": opt.REST.Credential, "token": opt.REST.Token, "scope": opt.REST.Scope,
		"oauth2-server-uri":   opt.REST.OAuth2ServerURI,
		"rest.signing-region": opt.REST.SigV4Region, "rest.signing-name": opt.REST.SigV4Service,
	} {
		if v != "" {
			props[k] = v
		}
	}
	if opt.S3.Endpoint != "" {
		props[icebergio.S3ForceVirtualAddressing] = "false" // bucket in the path
	}
	if opt.REST.SigV4 {
		props["rest.sigv4-enabled"] = "true"
	}
	if IsREST(opt.Catalog) {
		props["type"], props["uri"] = "rest", opt.Catalog
		if opt.REST.Warehouse != "" {
			props["warehouse"] = opt.REST.Warehouse
		}
		return props, nil
	}
	props["type"] = "sql"
	if strings.HasPrefix(opt.Warehouse, "s3://") {
		props["warehouse"] = opt.Warehouse
	} else {
		warehouse, err := filepath.Abs(opt.Warehouse)
		if err != nil {
			return nil, err
		}
		props["warehouse"] = "file://" + warehouse
	}
	if IsPostgres(opt.Catalog) {
		props["uri"], props[sqlcat.DriverKey], props[sqlcat.DialectKey] = opt.Catalog, "pgx", string(sqlcat.Postgres)
		return props, nil
	}
	path, err := filepath.Abs(opt.Catalog)
	if err != nil {
		return nil, err
	}
	// WAL and a busy timeout: the workers of a process share the file.
	props["uri"] = "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	props[sqlcat.DriverKey], props[sqlcat.DialectKey] = sqliteshim.ShimName, string(sqlcat.SQLite)
	return props, nil
}

// IsREST reports whether a catalog setting is a REST catalog's URL.
func IsREST(catalog string) bool {
	return strings.HasPrefix(catalog, "http://") || strings.HasPrefix(catalog, "https://")
}

// IsPostgres reports whether a catalog setting is a PostgreSQL URL.
func IsPostgres(catalog string) bool {
	return strings.HasPrefix(catalog, "postgres://") || strings.HasPrefix(catalog, "postgresql://")
}

// Close stops the staging leases and removes them (files still staged
// are orphans from then on), and releases the catalog.
func (s *Sink) Close() error {
	// Batches still in open writers have no load coming: their files go.
	s.writing.Lock()
	open := slices.Collect(maps.Values(s.streams))
	s.writing.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	for _, e := range open {
		s.abortEntry(ctx, e)
	}
	cancel()
	s.stopWriting()
	s.closeLeases()
	if c, ok := s.cat.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Catalog is the sink's catalog, for readers (tests, verify).
func (s *Sink) Catalog() catalog.Catalog { return s.cat }

// Identifiers are the raw and dead-letter tables' identifiers.
func (s *Sink) Identifiers() (raw, dlq table.Identifier) { return s.raw, s.dlq }

// tableIDs are the tables the sink writes, for maintenance: the main
// table, the dead-letter table, the derived and dedup tables if any.
func (s *Sink) tableIDs() []table.Identifier {
	ids := []table.Identifier{s.raw, s.dlq}
	if s.opt.Derived != nil {
		ids = append(ids, s.derived)
	}
	if s.dedups() {
		ids = append(ids, s.sibling(s.opt.DedupTable))
	}
	return ids
}

// DerivedIdentifier is the derived table's (Options.Derived).
func (s *Sink) DerivedIdentifier() table.Identifier { return s.derived }

// Prepare creates the namespace and the tables if absent, adds to existing
// tables the columns declared since they were created (addColumns; a raw
// table from before ktopic, ktimestamp and event_time keeps its
// day(add_time) partition spec: evolving the spec is left to the user,
// with an engine's ALTER TABLE … ADD PARTITION FIELD, and loads write
// with the current spec), checks their columns, and refuses a table that
// has data but no positions unless told to adopt it: starting such a
// table "from 0" would load everything again, starting it from the
// group's offsets might skip; only the user can say which is right.
func (s *Sink) Prepare(ctx context.Context) error {
	err := s.cat.CreateNamespace(ctx, table.Identifier{s.opt.Namespace}, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return fmt.Errorf("create namespace %s: %w", s.opt.Namespace, err)
	}
	tables := map[kind]*table.Table{}
	for _, k := range s.kinds() {
		t := struct {
			id     table.Identifier
			schema *iceberggo.Schema
		}{s.id(k), s.schemaOf(k)}
		tbl, err := s.createOrLoad(ctx, t.id, t.schema)
		if err != nil {
			return err
		}
		if tbl, err = s.addColumns(ctx, tbl, t.schema); err != nil {
			return err
		}
		if diff := diffSchema(t.schema, tbl.Schema()); len(diff) > 0 {
			return fmt.Errorf("table %s exists with other columns than tracelake needs:\n  %s", name(t.id), strings.Join(diff, "\n  "))
		}
		// A commit the catalog replays on a refreshed table would write
		// positions read before the refresh: the fence needs every
		// conflict to come back to tracelake.
		if n := tbl.Properties().GetInt(table.CommitNumRetriesKey, table.CommitNumRetriesDefault); n != 0 {
			return fmt.Errorf("table %s has %s=%d: tracelake needs it 0 (it retries a lost commit itself, after re-reading the positions)",
				name(t.id), table.CommitNumRetriesKey, n)
		}
		// Loads the branch dropped, not accounted for: their records
		// would be skipped (rollback.go).
		tables[k] = tbl
		r := findRollback(tbl.Metadata(), tbl.Properties())
		if !r.accountedFor() {
			return rollbackError(tbl, r)
		}
		s.startBranch(tbl, r)
		if !hasPositions(tbl.Properties()) && tbl.CurrentSnapshot() != nil && !s.opt.Adopt {
			return fmt.Errorf("table %s has data but no tracelake positions (%s*): it was written by something else. "+
				"Set sink.iceberg.adopt: true to let tracelake append to it, its partitions starting from the group's committed offsets", name(t.id), PositionKeyPrefix)
		}
	}
	if err := s.startRecovery(tables); err != nil {
		return err
	}
	if s.dedups() {
		if _, err := s.dedupTarget(ctx); err != nil {
			return err
		}
	}
	return nil
}

// isLoad reports whether a snapshot is a tracelake load's.
func isLoad(s *table.Snapshot) bool {
	if s.Summary == nil {
		return false
	}
	_, id := s.Summary.Properties[loadIDKey]
	_, legacy := s.Summary.Properties[legacyPositionsKey]
	return id || legacy
}

// positionsAt is the positions of the table as of snapshot cur, as far as
// the summaries of cur and its ancestors record them: per partition, the
// position the newest load that set it set (a load of dead letters only
// commits an empty snapshot with its positions too).
func positionsAt(meta table.Metadata, cur *table.Snapshot) map[sink.TopicPartition]int64 {
	out := map[sink.TopicPartition]int64{}
	for tp, b := range branchPositions(table.AncestorsOf(cur.SnapshotID, meta.SnapshotByID)) {
		out[tp] = b.pos
	}
	return out
}

// dayFieldID is the partition field of the day asked for when a table is
// created: of event_time in raw tables created since it exists, of
// add_time in older raw tables and in dead-letter tables. iceberg-go
// assigns the IDs itself, in the spec's order: a table's own is dayField's.
const dayFieldID = 1000

func (s *Sink) createOrLoad(ctx context.Context, id table.Identifier, sc *iceberggo.Schema) (*table.Table, error) {
	col, partition := "add_time", "add_day"
	if sc == rawSchema {
		col, partition = eventTimeColumn, "event_day"
	}
	source, _ := sc.FindFieldByName(col)
	spec := iceberggo.NewPartitionSpec(iceberggo.PartitionField{
		SourceIDs: []int{source.ID}, FieldID: dayFieldID, Name: partition, Transform: iceberggo.DayTransform{},
	})
	switch {
	case sc == s.derivedSchema && sc != nil:
		spec = typedSpec(s.opt.Derived, sc)
	case s.opt.Typed != nil && sc != dlqSchema:
		spec = typedSpec(s.opt.Typed, sc)
	}
	return s.createTable(ctx, id, sc, spec)
}

// createTable creates table id with tracelake's table properties, or
// loads it if it exists.
func (s *Sink) createTable(ctx context.Context, id table.Identifier, sc *iceberggo.Schema, spec iceberggo.PartitionSpec) (*table.Table, error) {
	props := maps.Clone(tableProperties)
	opts := []catalog.CreateTableOpt{catalog.WithPartitionSpec(&spec)}
	// Span tables are made with their sort order and trace_id bloom filter
	// declared (sorted.go), so that other engines know the layout from the
	// start, not from the first maintenance round; loads are not sorted
	// for it (writeView).
	if order, ok := spanSortOrder(sc); ok {
		opts = append(opts, catalog.WithSortOrder(order))
		props[bloomColumnKey] = "true"
	}
	maps.Copy(props, s.opt.TableProperties)
	tbl, err := s.cat.CreateTable(ctx, id, sc, append(opts, catalog.WithProperties(props))...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		tbl, err = s.cat.LoadTable(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", name(id), err)
	}
	return tbl, nil
}

// tableProperties are set on the tables tracelake creates. A load commits
// every few seconds, so without them each commit would leave one more
// metadata file and one more manifest for every later commit to carry.
var tableProperties = iceberggo.Properties{
	table.MetadataDeleteAfterCommitEnabledKey: "true", // keep the last 100 metadata files
	table.ManifestMergeEnabledKey:             "true", // merge small manifests as appends add them
	// zstd level 1 writes Parquet 1.28x faster than the default level for
	// files 2% bigger (BenchmarkWriteParquet, docs/BENCHMARKS.md).
	table.ParquetCompressionLevelKey: "1",
}

func name(id table.Identifier) string { return strings.Join(id, ".") }

// position is one partition's next offset, as the legacy JSON list holds
// it.
type position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Next      int64  `json:"next"`
}

// positionKey is the property holding tp's position.
func positionKey(tp sink.TopicPartition) string {
	return PositionKeyPrefix + tp.Topic + "." + strconv.Itoa(int(tp.Partition))
}

// isPositionKey reports whether a property holds positions.
func isPositionKey(key string) bool {
	return key == legacyPositionsKey || strings.HasPrefix(key, PositionKeyPrefix)
}

// hasPositions reports whether properties hold any position.
func hasPositions(props iceberggo.Properties) bool {
	for k := range props {
		if isPositionKey(k) {
			return true
		}
	}
	return false
}

// positions reads a table's positions.
func positions(tbl *table.Table) (map[sink.TopicPartition]int64, error) {
	pos, err := parsePositions(tbl.Properties())
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", name(tbl.Identifier()), err)
	}
	return pos, nil
}

// parsePositions reads the positions in properties (a table's, or a
// snapshot summary's): the legacy JSON list, overridden by per-partition
// properties (topic names may hold dots, partitions do not).
func parsePositions(props iceberggo.Properties) (map[sink.TopicPartition]int64, error) {
	out := map[sink.TopicPartition]int64{}
	if text, ok := props[legacyPositionsKey]; ok {
		var list []position
		if err := json.Unmarshal([]byte(text), &list); err != nil {
			return nil, fmt.Errorf("property %s is not tracelake's: %w", legacyPositionsKey, err)
		}
		for _, p := range list {
			out[sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.Next
		}
	}
	for k, v := range props {
		tp, ok, perr := partitionKey(k, PositionKeyPrefix)
		if !ok {
			continue
		}
		next, nerr := strconv.ParseInt(v, 10, 64)
		if perr != nil || nerr != nil || next < 0 {
			return nil, fmt.Errorf("property %s=%q: want %s<topic>.<partition> = the next offset to load", k, v, PositionKeyPrefix)
		}
		out[tp] = next
	}
	return out, nil
}

// partitionKey reads the partition a property named prefix<topic>.<partition>
// is about (topic names may hold dots, partitions do not); ok is false
// for a property without prefix.
func partitionKey(key, prefix string) (tp sink.TopicPartition, ok bool, err error) {
	tail, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return tp, false, nil
	}
	dot := strings.LastIndexByte(tail, '.')
	part, err := strconv.ParseInt(tail[dot+1:], 10, 32)
	if dot <= 0 || err != nil || part < 0 {
		return tp, true, fmt.Errorf("property %s: want %s<topic>.<partition>", key, prefix)
	}
	return sink.TopicPartition{Topic: tail[:dot], Partition: int32(part)}, true, nil
}

// formatPositions renders positions as properties to set, sorted.
func formatPositions(m map[sink.TopicPartition]int64) string {
	if len(m) == 0 {
		return "none recorded"
	}
	list := make([]string, 0, len(m))
	for tp, n := range m {
		list = append(list, positionKey(tp)+"="+strconv.FormatInt(n, 10))
	}
	slices.Sort(list)
	return strings.Join(list, ", ")
}

// AllPositions returns the raw table's positions of every partition.
func (s *Sink) AllPositions(ctx context.Context) (map[sink.TopicPartition]int64, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	return positions(tbl)
}

// Positions returns the raw table's positions of parts, once the derived
// rows a stopped load left marked at their dead letters are deleted
// (finishDeadDerived).
func (s *Sink) Positions(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	all, err := positions(tbl)
	if err != nil {
		return nil, err
	}
	// Derived rows a stopped load left marked for deletion go before the
	// partitions' records are read again.
	if err := s.finishDeadDerived(ctx, tbl, parts); err != nil {
		return nil, err
	}
	out := map[sink.TopicPartition]int64{}
	for _, tp := range parts {
		if n, ok := all[tp]; ok {
			out[tp] = n
		}
	}
	if err := s.resumeRecovering(ctx, parts, out); err != nil {
		return nil, err
	}
	return out, nil
}

// FurthestPositions implements sink.TableByTableCommitter: the furthest
// position of parts that any of the load's tables (main, dead-letter,
// derived) records. An abandonment of theirs that a stopped process left
// half done (its positions taken, the rows of the other tables there not
// deleted: Abandon) is finished first, at the sequence's start, before
// any request takes a position.
func (s *Sink) FurthestPositions(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	if err := s.finishAbandoningOf(ctx, parts); err != nil {
		return nil, err
	}
	out := map[sink.TopicPartition]int64{}
	for _, k := range s.kinds() {
		tbl, err := s.loadTable(ctx, s.id(k))
		if err != nil {
			return nil, err
		}
		pos, err := positions(tbl)
		if err != nil {
			return nil, err
		}
		for _, tp := range parts {
			if n, ok := pos[tp]; ok {
				out[tp] = max(out[tp], n)
			}
		}
	}
	return out, nil
}

// abandonedKeyPrefix begins the main table's properties listing a
// partition's abandoned positions (sink.TableByTableCommitter.Abandon):
// tracelake.abandoned.<topic>.<partition> = "first-last,first-last".
const abandonedKeyPrefix = "tracelake.abandoned."

// abandoningKeyPrefix begins the main table's properties listing, in the
// same form, a partition's abandoned positions whose rows in the
// dead-letter and derived tables are not yet deleted (Abandon's second
// step): a process stopped between the steps leaves them, and the next
// start deletes them (FurthestPositions).
const abandoningKeyPrefix = "tracelake.abandoning."

// runsKey is the property of tp's runs of positions under prefix.
func runsKey(prefix string, tp sink.TopicPartition) string {
	return prefix + tp.Topic + "." + strconv.Itoa(int(tp.Partition))
}

// Abandon implements sink.TableByTableCommitter. First, in one commit of
// the main table (an empty snapshot, pinned as a load's), its position of
// tp moves past last, first..last is added to the partition's abandoned
// positions, and marked as to delete: from then on a commit of the main
// table at those positions (the failed load's, landing late with its
// outcome unknown, or another process's on the same otlp.instance) is
// fenced out, and its requests refused. Then the rows the dead-letter and
// derived tables hold there are deleted (the failed load's requests were
// answered with a retry: their clients send them again, at other
// positions) and the mark cleared (finishAbandoning). Deleted first, a
// main table's commit landing between the two steps stored spans whose
// operations were gone, and was acknowledged. Nothing is abandoned (ok
// false) when the main table's position is past last already: a commit
// of the spans landed first, and the rows at those positions are its. The
// main table's commit that loses a race (another instance's load,
// maintenance) is made again on the table read again.
func (s *Sink) Abandon(ctx context.Context, tp sink.TopicPartition, first, last int64) (abandoned sink.Run, ok bool, err error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	committed, err := s.commitLostRaces(ctx, "abandonment", s.raw, func(tbl *table.Table) (*table.Transaction, error) {
		txn, run, err := s.abandonTxn(ctx, tbl, tp, first, last)
		abandoned, ok = run, txn != nil
		return txn, err
	})
	if err != nil {
		return sink.Run{}, false, fmt.Errorf("commit the abandoned positions %d-%d of %s: %w", first, last, tp, err)
	}
	if committed == nil {
		return sink.Run{}, false, nil
	}
	s.committedBranch(committed)
	s.remember(committed)
	return abandoned, ok, s.finishAbandoning(ctx, tp)
}

// abandonTxn is the main table's commit of Abandon on tbl as read: tp's
// position moved past last and the run of first..last it moves over added
// to its abandoned positions and to those whose rows are to delete; nil
// when tbl's position is past last already.
func (s *Sink) abandonTxn(ctx context.Context, tbl *table.Table, tp sink.TopicPartition, first, last int64) (*table.Transaction, sink.Run, error) {
	if err := s.checkBranch(tbl); err != nil {
		return nil, sink.Run{}, err
	}
	start, err := positions(tbl)
	if err != nil {
		return nil, sink.Run{}, err
	}
	if start[tp] > last {
		return nil, sink.Run{}, nil
	}
	run := sink.Run{First: max(first, start[tp]), Last: last}
	next := maps.Clone(start)
	next[tp] = last + 1
	props := tbl.Properties()
	set := iceberggo.Properties{}
	for _, prefix := range []string{abandonedKeyPrefix, abandoningKeyPrefix} {
		key := runsKey(prefix, tp)
		runs, err := parseRuns(key, props[key])
		if err != nil {
			return nil, sink.Run{}, err
		}
		set[key] = formatRuns(append(runs, run))
	}
	txn, err := s.mainPropertiesTxn(ctx, tbl, start, next, set, nil)
	return txn, run, err
}

// mainPropertiesTxn begins a commit of the main table tbl, read with
// positions start, that moves them to next, sets set and removes remove,
// in an empty snapshot pinned as a load's: a commit of properties alone
// would pass the snapshot assertion of another commit of properties
// alone (addFiles).
func (s *Sink) mainPropertiesTxn(ctx context.Context, tbl *table.Table, start, next map[sink.TopicPartition]int64, set iceberggo.Properties, remove []string) (*table.Transaction, error) {
	txn, summary, err := beginPositionsCommit(tbl, start, next, newLoadID())
	if err != nil {
		return nil, err
	}
	if len(set) > 0 {
		if err := txn.SetProperties(set); err != nil {
			return nil, err
		}
	}
	if len(remove) > 0 {
		if err := txn.RemoveProperties(remove); err != nil {
			return nil, err
		}
	}
	if err := s.acceptRollbacks(txn, tbl); err != nil {
		return nil, err
	}
	if err := addFiles(ctx, txn, tbl, s.mainSchema(), nil, summary); err != nil {
		return nil, err
	}
	return txn, nil
}

// finishAbandoningOf is finishAbandoning of each partition of parts.
func (s *Sink) finishAbandoningOf(ctx context.Context, parts []sink.TopicPartition) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	for _, tp := range parts {
		if err := s.finishAbandoning(ctx, tp); err != nil {
			return fmt.Errorf("finish the abandonment of positions of %s a stopped process left half done: %w", tp, err)
		}
	}
	return nil
}

// finishAbandoning completes the abandonments of tp's positions that the
// main table marks as to delete (abandoningKeyPrefix): the rows the
// dead-letter and derived tables hold there are deleted, and those
// tables' positions taken past them, so that a load's commit of them
// landing late (its outcome unknown, or another process's) is fenced out
// too; then the mark is cleared. Run under commitMu.
func (s *Sink) finishAbandoning(ctx context.Context, tp sink.TopicPartition) error {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	key := runsKey(abandoningKeyPrefix, tp)
	runs, err := parseRuns(key, tbl.Properties()[key])
	if err != nil || len(runs) == 0 {
		return err
	}
	for _, k := range s.kinds() {
		if k != mainTable {
			if err := s.deleteAbandoned(ctx, k, tp, runs); err != nil {
				return err
			}
		}
	}
	committed, err := s.commitLostRaces(ctx, "abandonment", s.raw, func(tbl *table.Table) (*table.Transaction, error) {
		return s.unmarkTxn(ctx, tbl, abandoningKeyPrefix, tp, runs)
	})
	if err != nil {
		return fmt.Errorf("clear the mark of the abandoned positions %s of %s, their rows deleted: %w", formatRuns(runs), tp, err)
	}
	if committed != nil {
		s.committedBranch(committed)
		s.remember(committed)
	}
	s.log.Info("deleted the rows of the other tables at abandoned positions", "partition", tp, "positions", formatRuns(runs))
	return nil
}

// unmarkTxn is the main table's commit that removes done from tp's
// positions marked under prefix (abandoningKeyPrefix,
// deadDerivedKeyPrefix) as tbl holds them; nil when none of done is
// marked any more. Runs marked meanwhile stay.
func (s *Sink) unmarkTxn(ctx context.Context, tbl *table.Table, prefix string, tp sink.TopicPartition, done []sink.Run) (*table.Transaction, error) {
	if err := s.checkBranch(tbl); err != nil {
		return nil, err
	}
	key := runsKey(prefix, tp)
	marked, err := parseRuns(key, tbl.Properties()[key])
	if err != nil {
		return nil, err
	}
	left := slices.DeleteFunc(slices.Clone(marked), func(r sink.Run) bool { return slices.Contains(done, r) })
	if len(left) == len(marked) {
		return nil, nil
	}
	start, err := positions(tbl)
	if err != nil {
		return nil, err
	}
	if len(left) > 0 {
		return s.mainPropertiesTxn(ctx, tbl, start, start, iceberggo.Properties{key: formatRuns(left)}, nil)
	}
	return s.mainPropertiesTxn(ctx, tbl, start, start, nil, []string{key})
}

// deleteAbandoned deletes the rows of table k (the dead-letter or derived
// table) at tp's positions in runs and moves its position of tp past them,
// in one commit: a commit of the table read before it fails its snapshot
// assertion, and one read after it is fenced by the position.
func (s *Sink) deleteAbandoned(ctx context.Context, k kind, tp sink.TopicPartition, runs []sink.Run) error {
	id := s.id(k)
	_, err := s.commitLostRaces(ctx, "abandonment", id, func(tbl *table.Table) (*table.Transaction, error) {
		start, err := positions(tbl)
		if err != nil {
			return nil, err
		}
		next := maps.Clone(start)
		next[tp] = max(start[tp], runs[len(runs)-1].Last+1)
		txn, summary, err := beginPositionsCommit(tbl, start, next, newLoadID())
		if err != nil {
			return nil, err
		}
		if start[tp] <= runs[0].First {
			// None of its commits reached them: no row to delete.
			return txn, addFiles(ctx, txn, tbl, s.schemaOf(k), nil, summary)
		}
		return txn, txn.Delete(ctx, runsFilter(k, tp, runs), summary)
	})
	if err != nil {
		return fmt.Errorf("delete the rows of %s at the abandoned positions %s of %s: %w", name(id), formatRuns(runs), tp, err)
	}
	return nil
}

// runsFilter selects the rows of table k at tp's positions in runs.
func runsFilter(k kind, tp sink.TopicPartition, runs []sink.Run) iceberggo.BooleanExpression {
	topic, partition, offset := schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn
	if k == dlqTable {
		topic, partition, offset = "topic", "partition", "offset"
	}
	var in iceberggo.BooleanExpression = iceberggo.AlwaysFalse{}
	for _, r := range runs {
		in = iceberggo.NewOr(in, iceberggo.NewAnd(iceberggo.GreaterThanEqual(iceberggo.Reference(offset), r.First),
			iceberggo.LessThanEqual(iceberggo.Reference(offset), r.Last)))
	}
	return iceberggo.NewAnd(iceberggo.EqualTo(iceberggo.Reference(topic), tp.Topic),
		iceberggo.EqualTo(iceberggo.Reference(partition), tp.Partition), in)
}

// Abandoned returns the main table's abandoned positions per partition
// (see Abandon), for verify.
func (s *Sink) Abandoned(ctx context.Context) (map[sink.TopicPartition][]sink.Run, error) {
	return s.runsOf(ctx, abandonedKeyPrefix)
}

// Abandoning returns, per partition, the abandoned positions whose rows in
// the dead-letter and derived tables are not yet deleted (Abandon between
// its steps, or a process stopped there until the next start), for
// verify: rows there are the failed load's, about to go, not a request
// stored twice.
func (s *Sink) Abandoning(ctx context.Context) (map[sink.TopicPartition][]sink.Run, error) {
	return s.runsOf(ctx, abandoningKeyPrefix)
}

// DeadDerived returns, per partition, the offsets of dead letters whose
// derived rows (a killed load's) a load marked and has not yet deleted
// (deadDerivedKeyPrefix), for verify.
func (s *Sink) DeadDerived(ctx context.Context) (map[sink.TopicPartition][]sink.Run, error) {
	return s.runsOf(ctx, deadDerivedKeyPrefix)
}

// runsOf reads the main table's runs of positions under prefix, per
// partition.
func (s *Sink) runsOf(ctx context.Context, prefix string) (map[sink.TopicPartition][]sink.Run, error) {
	tbl, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return nil, err
	}
	out := map[sink.TopicPartition][]sink.Run{}
	for k, v := range tbl.Properties() {
		tp, ok, err := partitionKey(k, prefix)
		if !ok {
			continue
		}
		if err != nil {
			return nil, err
		}
		if out[tp], err = parseRuns(k, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseRuns reads the runs of positions "first-last,first-last" of
// property key, sorted; none for an empty value.
func parseRuns(key, v string) ([]sink.Run, error) {
	if v == "" {
		return nil, nil
	}
	var out []sink.Run
	for _, r := range strings.Split(v, ",") {
		var run sink.Run
		if _, err := fmt.Sscanf(r, "%d-%d", &run.First, &run.Last); err != nil || run.First > run.Last {
			return nil, fmt.Errorf("property %s=%q: want first-last,…", key, v)
		}
		out = append(out, run)
	}
	slices.SortFunc(out, func(a, b sink.Run) int { return cmp.Compare(a.First, b.First) })
	return out, nil
}

// formatRuns renders runs as parseRuns reads them.
func formatRuns(runs []sink.Run) string {
	list := make([]string, len(runs))
	for i, r := range runs {
		list[i] = fmt.Sprintf("%d-%d", r.First, r.Last)
	}
	return strings.Join(list, ",")
}

// loadTable loads a table's current metadata from the catalog.
func (s *Sink) loadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := s.cat.LoadTable(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", name(id), err)
	}
	return tbl, nil
}

// setPositions sets, in txn, the position properties of the partitions
// whose position moved from old to next, and returns them. Only those: the
// catalog applies them over the table's current properties, so a commit
// never resets a partition it did not load. A table holding the legacy
// JSON list gets every position as a property of its own, and the list
// removed.
func setPositions(txn *table.Transaction, props iceberggo.Properties, old, next map[sink.TopicPartition]int64) (iceberggo.Properties, error) {
	_, legacy := props[legacyPositionsKey]
	set := iceberggo.Properties{}
	for tp, n := range next {
		if o, ok := old[tp]; legacy || !ok || o != n {
			set[positionKey(tp)] = strconv.FormatInt(n, 10)
		}
	}
	if legacy {
		if err := txn.RemoveProperties([]string{legacyPositionsKey}); err != nil {
			return nil, err
		}
	}
	if len(set) == 0 {
		return set, nil
	}
	return set, txn.SetProperties(set)
}

// reportCommit tells OnCommit of a load's commit (commitMu held).
func (s *Sink) reportCommit(ctx context.Context, id table.Identifier, took time.Duration, committed *table.Table, err error) {
	if s.opt.OnCommit == nil {
		return
	}
	st := CommitStats{Table: name(id), Took: took, Conflict: err != nil && LostRace(err), Failed: err != nil && !LostRace(err)}
	if err == nil && committed != nil {
		st.Snapshots = len(committed.Metadata().Snapshots())
		// Reading the size is one more request to the store: at most
		// once a minute per table, not on every load.
		if time.Since(s.sizedAt[st.Table]) >= time.Minute {
			s.sizedAt[st.Table] = time.Now()
			st.MetadataBytes = fileSize(ctx, committed, committed.MetadataLocation())
		}
	}
	s.opt.OnCommit(st)
}

// fileSize is the size of a file of tbl's, 0 if it cannot be read.
func fileSize(ctx context.Context, tbl *table.Table, path string) int64 {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0
	}
	f, err := fs.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0
	}
	return info.Size()
}

// LostRace reports whether a commit failed because the table changed
// under it, which leaves the catalog untouched: the catalog's
// compare-and-swap failed (ErrCommitFailed), or a requirement of the
// commit no longer held. iceberg-go's catalogs check requirements before
// writing anything and report a failed one only by its text.
func LostRace(err error) bool {
	return errors.Is(err, table.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed: ")
}

// removeFiles deletes data files no commit references. A file it cannot
// delete is left to orphan cleanup.
func (s *Sink) removeFiles(ctx context.Context, tbl *table.Table, files []iceberggo.DataFile) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.FilePath()
	}
	s.removePaths(ctx, tbl, paths)
}

// removePaths is removeFiles by path.
func (s *Sink) removePaths(ctx context.Context, tbl *table.Table, paths []string) {
	if len(paths) == 0 {
		return
	}
	fsys, err := tbl.FS(ctx)
	if err == nil {
		for _, p := range paths {
			if err = removeFile(fsys, p); err != nil {
				break
			}
		}
	}
	if err != nil {
		s.log.Warn("could not delete the data files of a failed commit; tracelake orphans removes them later",
			"table", name(tbl.Identifier()), "files", len(paths), "err", err)
		return
	}
	s.log.Info("deleted the data files of a failed commit", "table", name(tbl.Identifier()), "files", len(paths))
}

// removeFile removes path, a file already gone (orphan cleanup's work)
// counting as removed.
func removeFile(fsys icebergio.IO, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// DataFiles lists the data files of a table's (the dead-letter table's
// with dlq) current snapshot.
func (s *Sink) DataFiles(ctx context.Context, dlq bool) ([]iceberggo.DataFile, error) {
	id := s.raw
	if dlq {
		id = s.dlq
	}
	tbl, err := s.loadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan files of %s: %w", name(id), err)
	}
	out := make([]iceberggo.DataFile, len(tasks))
	for i, task := range tasks {
		out[i] = task.File
	}
	return out, nil
}

// mainSchema is the schema of the main table: the raw table's, or the
// declared table's.
func (s *Sink) mainSchema() *iceberggo.Schema {
	if s.opt.Typed != nil {
		return s.typed
	}
	return rawSchema
}

// Stored reads a table (the dead-letter table with dlq) with a scan of its
// current snapshot and returns, per partition, the offsets stored (with
// their repeats): what verify needs, and what tests read back. A declared
// table's rows beyond their message's first are checked by their index
// too (rowCheck): the offsets' RepeatedRows and MissingRows. Rows at or
// past the table's positions, read from the metadata whose snapshot is
// scanned (a load commits both at once, so a load committing meanwhile
// cannot make a row look past them), are the offsets' PastPosition.
func (s *Sink) Stored(ctx context.Context, dlq bool) (map[sink.TopicPartition]*sink.Offsets, error) {
	id, cols := s.raw, storedColumns{offset: "koffset", partition: "kpartition", topic: "record_metadata", inMetadata: true}
	if s.opt.Typed != nil {
		cols = storedColumns{offset: schema.OffsetColumn, partition: schema.PartitionColumn, topic: schema.TopicColumn, index: schema.IndexColumn}
	}
	if dlq {
		id, cols = s.dlq, storedColumns{offset: "offset", partition: "partition", topic: "topic"}
	}
	tbl, err := s.loadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	pos, err := positions(tbl)
	if err != nil {
		return nil, err
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields(cols.names()...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", name(id), err)
	}
	out := map[sink.TopicPartition]*sink.Offsets{}
	scan := func(later func(sink.TopicPartition, int64, int32) error) error {
		for rec, err := range batches {
			if err != nil {
				return fmt.Errorf("scan %s: %w", name(id), err)
			}
			err = countStored(rec, cols, pos, out, later)
			rec.Release()
			if err != nil {
				return fmt.Errorf("scan %s: %w", name(id), err)
			}
		}
		return nil
	}
	if cols.index == "" {
		// One row per message: the offsets' runs see every row.
		if err := scan(nil); err != nil {
			return nil, err
		}
		return out, nil
	}
	rows, err := newRowCheck(ctx)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", name(id), err)
	}
	defer rows.close()
	if err := rows.load(ctx, scan); err != nil {
		return nil, err
	}
	if err := rows.count(ctx, out); err != nil {
		return nil, fmt.Errorf("check %s: %w", name(id), err)
	}
	if err := rows.close(); err != nil {
		return nil, fmt.Errorf("check %s: %w", name(id), err)
	}
	return out, nil
}
