// Package sink declares what the pipeline needs from a destination: prepare
// tables, report the positions recorded with the data, stage one batch, and
// load many staged batches atomically with their ledger rows. One
// sub-package per destination implements it; sinks never import pipeline.
package sink

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrFatal marks a sink error that retrying in this process cannot fix:
// the destination must be reopened (DuckDB, for one, invalidates a database
// after a fatal error). The pipeline stops at once instead of retrying;
// the next start resumes from the ledger, so nothing is lost.
var ErrFatal = errors.New("the sink cannot go on in this process: restart tracelake (it resumes from the ledger; nothing is lost)")

// ErrTransient marks a question the sink could not answer now (its
// database failed the read), as opposed to its answer: asked again later,
// it may answer. The pipeline reads the record again rather than decide
// on a failure (a record dead-lettered for one would be a valid change
// kept out of its table).
var ErrTransient = errors.New("not answered now")

// ErrNoDerivedTable is a sink's answer to a batch with Derived rows when it
// loads no derived table: configuration checks keep such batches away, so
// it is a bug, and the load stops rather than drop the rows.
var ErrNoDerivedTable = errors.New("BUG: derived rows (genai_operations) for a sink that does not load them")

// TopicPartition names one Kafka partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// SequenceTopicPrefix begins the ledger topic of the OTLP receivers' own
// sequence (otlp.mode load; directload.Topic): a name Kafka never gives a
// topic. Here so that verify, which directload's tests use, knows it too.
const SequenceTopicPrefix = "otlp:"

func (tp TopicPartition) String() string { return tp.Topic + "/" + strconv.Itoa(int(tp.Partition)) }

// Range is what one batch holds of one partition. Consecutive ranges of a
// partition touch: First is the position reading started from (the previous
// range's Last+1, or the resume position), so a gap in the ledger is a real
// gap even where Kafka itself skips offsets (transaction markers, compaction).
type Range struct {
	TopicPartition
	First   int64 // first offset covered
	Last    int64 // last offset read
	Records int64 // rows for the main table
	DLQ     int64 // rows for the dead-letter table
	// DerivedDLQ are the rows of DLQ that are a derived table's rows the
	// table refused (their main rows are in Records too), where a sink
	// isolates such rows (Databend): a load's rows of its records are
	// Records + DLQ - DerivedDLQ.
	DerivedDLQ int64
	// TopicID is Kafka's id of the topic the range was read from, as the
	// worker listed it when the partition was assigned; "" when unknown
	// (a Kafka before 2.8, a listing that failed, an OTLP sequence). A
	// sink that keeps it (TopicIDKeeper) records it with the position, so
	// a topic deleted and recreated under the same name, whose offsets
	// are not the ledger's, is told from the old one even once its log
	// reaches past the ledger.
	TopicID string
}

// Batch is a closed batch of encoded rows, owned by the sink once passed to
// Stage (the pipeline does not touch Rows or DLQ afterwards).
type Batch struct {
	Rows []byte // NDJSON rows for the main table
	// Records are the main table's rows as the Kafka records themselves,
	// instead of Rows, for a RecordStager: raw mode only.
	Records []Record
	DLQ     []byte // NDJSON rows for the dead-letter table
	// Derived are NDJSON rows of a table derived from the main table's
	// (genai_operations of otel_spans), each with the coordinates of the
	// row it comes from: loaded in the same transaction, fenced alike. Only
	// a sink given a derived table gets them.
	Derived []byte
	// Routed are the rows of routed tables, one entry per table (see
	// RoutedTo), loaded in the transaction of the rest, fenced alike: a
	// Range's Records count them. Only a sink.Router gets them.
	Routed []TableRows
	// RoutedBytes is what Routed's rows hold, kept by whoever appends to
	// them, for the in-flight memory budget.
	RoutedBytes int64
	// SchemaTopics are the Debezium schema change topics the batch's
	// records showed, each with its server (see SawSchemaTopic): a sink
	// that marks done hours records them with the load. Only a
	// sink.Router gets them.
	SchemaTopics []SchemaTopic
	routed       map[string]int // index in Routed by table name
	Ranges       []Range        // one per partition, sorted by topic and partition
	MaxLine      int            // longest NDJSON line, for readers with a line limit
	// Stream names the sequence the batch belongs to (a worker's): a
	// stream's batches are staged one at a time, in the order they were
	// read, and each load or discard of the stream names every batch of
	// it staged before the load or discard began, all but those staged
	// meanwhile. A sink may write a stream's batches into files shared
	// between them (the Iceberg sink's load-sized files), and commit a
	// batch staged meanwhile with the load; each load still reports
	// (Loaded) the rows of the batches it names. Empty: a batch on its
	// own.
	Stream string
	// ID tells this batch from every other staging of the same offsets
	// (by another worker or process, or after a re-read): see NewBatchID.
	// Empty only in tests that build batches by hand.
	ID string
}

// batchIDs numbers the batches of this process; batchProcess tells
// processes apart.
var (
	batchIDs     atomic.Uint64
	batchProcess = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
)

// NewBatchID returns an ID no other batch of any process has: a random
// token of this process and a counter.
func NewBatchID() string {
	return batchProcess + strconv.FormatUint(batchIDs.Add(1), 36)
}

// LoadIdentity names a load of files: the same for every attempt to load
// the same staged files (a retry after a reply was lost), another for a
// load of any other staging, whose files carry another Batch.ID in their
// names (Batch.Name), even of the same offsets (another process loading
// with the same otlp.instance, a re-read). A sink records it as the
// load's load_id in its ledger, so that an attempt finding its positions
// fenced can tell its own earlier commit from another's (Loaded.Own).
func LoadIdentity(files []File) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return IdentityOf(names)
}

// IdentityOf is LoadIdentity of the staged files (or batches) named.
func IdentityOf(names []string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0}) // names never hold NUL: no two lists hash alike by joining
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Record is a raw row kept as its Kafka record (already checked: its value
// is valid JSON in UTF-8, or empty) with the row's uuid.
type Record struct {
	*kgo.Record
	ID [16]byte
}

// Name is the batch's file name stem: topic, partition and first/last
// offset of its first range, the number of ranges, and its ID, so a retry
// of its staging uses the same name and no other staging of the same
// offsets ever does (two owners of a partition, or a re-read, would
// otherwise write, load and delete one another's files). Without an ID, a
// hash of the ranges stands in.
func (b *Batch) Name() string {
	if len(b.Ranges) == 0 {
		return "empty"
	}
	id := b.ID
	if id == "" {
		h := fnv.New32a()
		for _, r := range b.Ranges {
			fmt.Fprintf(h, "%s/%d/%d/%d;", r.Topic, r.Partition, r.First, r.Last)
		}
		id = fmt.Sprintf("%08x", h.Sum32())
	}
	r := b.Ranges[0]
	return fmt.Sprintf("%s-%d-%d-%d-n%d-%s", sanitize(r.Topic), r.Partition, r.First, r.Last, len(b.Ranges), id)
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			out[i] = '_'
		}
	}
	return string(out)
}

// File is a staged batch: where its rows wait to be loaded.
type File struct {
	Name     string // deterministic name from Batch.Name
	RowsPath string // "" when the batch had no main-table rows
	DLQPath  string // "" when the batch had no dead-letter rows
	// DerivedPath holds the batch's Derived rows; "" for none.
	DerivedPath string
	// Routed are the batch's routed tables' rows, one file per table.
	Routed []RoutedFile
	// SchemaTopics are the batch's (Batch.SchemaTopics).
	SchemaTopics []SchemaTopic
	Ranges       []Range
	Bytes        int64 // staged bytes (after compression)
	MaxLine      int
}

// Sink is a destination. Prepare is called once before anything else; the
// other methods may be called concurrently by several workers.
type Sink interface {
	// Prepare creates the raw (or checks the user's), dead-letter and ledger
	// tables, and fails with every schema difference if they do not match.
	Prepare(ctx context.Context) error
	// Positions returns, for each partition the ledger knows, the next offset
	// to read: the last loaded offset + 1. Partitions absent from the map have
	// no recorded position.
	Positions(ctx context.Context, parts []TopicPartition) (map[TopicPartition]int64, error)
	// Stage makes a batch loadable. It is idempotent: staging the same batch
	// again yields the same File.
	Stage(ctx context.Context, b *Batch) (File, error)
	// Load loads the files' rows and writes their ledger rows in one atomic
	// step. Rows at or below a partition's recorded position are skipped, so
	// a load repeated after a lost reply, or by a former owner of the
	// partition, never doubles a row; so are rows an earlier file of the same
	// load covers (files in the order their batches were read: a partition
	// read again may be in two of them; see Runs). On success the staged
	// files are removed.
	Load(ctx context.Context, files []File) (Loaded, error)
	// Discard removes staged files that will not be loaded (their records are
	// re-read from Kafka).
	Discard(files []File)
	// Close releases the sink.
	Close() error
}

// TopicIDKeeper is a Sink that records each range's TopicID in its ledger.
type TopicIDKeeper interface {
	// TopicIDs returns, for each partition of parts whose ledger recorded a
	// topic id, the id recorded with its furthest range that has one.
	// Partitions loaded only by a release that did not record ids (or from
	// a Kafka without them) are absent: there is nothing to check them by.
	TopicIDs(ctx context.Context, parts []TopicPartition) (map[TopicPartition]string, error)
}

// LedgerReader is a TopicIDKeeper that reads Positions and TopicIDs of
// the same partitions in one read of its ledger, as a group's assignment
// wants both. The pipeline reads positions there instead of Positions: a
// wrapper that embeds a LedgerReader and changes what Positions or
// TopicIDs answer must change PositionsAndTopicIDs alike.
type LedgerReader interface {
	PositionsAndTopicIDs(ctx context.Context, parts []TopicPartition) (map[TopicPartition]int64, map[TopicPartition]string, error)
}

// ConcurrentStager is a Sink whose Stage mostly waits on the network (an
// upload): each worker then stages up to StageAhead batches at once. A
// sink whose Stage is local work (DuckDB writes a file) does not implement
// it: staging concurrently there only takes CPU from the loads.
type ConcurrentStager interface {
	StageAhead() int
}

// RecordStager is a Sink that takes a raw-mode batch's rows as the Kafka
// records (Batch.Records) and builds its own rows from them, instead of
// NDJSON (Batch.Rows): the Iceberg sink builds Arrow columns.
type RecordStager interface {
	StagesRecords()
}

// FileStager is a Sink whose Stage writes the batch's rows out of memory,
// into files of the destination's (the Iceberg sink's data files): the
// pipeline frees the batch's share of max_inflight_bytes once it is
// staged, not once it is loaded, so a long wait between loads (an Iceberg
// commit interval) does not stop reading.
type FileStager interface {
	StagesToFiles()
}

// MemoryHolder is a Sink that holds staged rows in memory after Stage
// returned (the Iceberg sink's open writers buffer a row group of each
// partition): the pipeline gives it a share of max_inflight_bytes, bytes
// for all its streams (workers), and counts the batches against the rest.
type MemoryHolder interface {
	HoldUpTo(bytes int64, streams int)
}

// CommitReporter is a Sink whose load can tell when the files' rows are in
// its transaction and only the commit is left: the pipeline then frees
// their share of max_inflight_bytes. DuckDB's commit (writing the WAL and
// checkpointing, most of a load) runs on one core; freed there, the worker
// reads and stages its next batches on the other core during the commit,
// instead of at the load's end, where that work took CPU from the next
// load's parallel insert (docs/BENCHMARKS.md, "early_release").
type CommitReporter interface {
	// LoadReporting is Load calling committing, on the calling goroutine,
	// before the commit: after every file was read. It may be called more
	// than once (a load made in parts) or never (a load that failed first).
	LoadReporting(ctx context.Context, files []File, committing func()) (Loaded, error)
}

// RowsReleaser is a Sink whose Stage keeps no reference to the batch's
// Rows and Derived once it returns (DuckDB writes them to files): the
// pipeline reuses their memory for the next batches instead of allocating
// (and the collector freeing) a batch's worth of bytes per batch.
type RowsReleaser interface {
	ReleasesRows()
}

// Finisher is a Sink that completes, once the pipeline's workers have
// stopped, work it defers past its loads: the DuckDB sink moves the
// routed rows still in its landing table into their changelog tables, so
// that a stopped process leaves them there.
type Finisher interface {
	Finish(ctx context.Context) error
}

// TableByTableCommitter is a Sink whose load commits its tables one after
// another, each fenced by positions of its own (Iceberg): a load that
// fails between two commits leaves the tables committed first ahead of
// Positions (the main table's). Retrying the same staged files completes
// it; a sequence that cannot give its positions' rows again (the OTLP
// receivers' own, otlp.mode load) must instead resume past every table's
// positions, or rows given a reused position are fenced out of the
// tables that moved ahead.
type TableByTableCommitter interface {
	// FurthestPositions returns, for each partition of parts that any of
	// the load's tables records, the furthest of their positions.
	FurthestPositions(ctx context.Context, parts []TopicPartition) (map[TopicPartition]int64, error)
	// Abandon moves the main table's position of tp past last, recording
	// the positions of first..last it moves over as positions that hold
	// nothing and never will (a load that failed after committing some
	// tables held them; its requests were refused for their clients to
	// retry), so that verify tells them from lost records, and deletes
	// what the other tables hold there. It returns the run of positions
	// abandoned; none (ok false) when the main table's position is past
	// last already (a commit of the main table at those positions landed
	// first: they hold its rows).
	Abandon(ctx context.Context, tp TopicPartition, first, last int64) (abandoned Run, ok bool, err error)
}

// LoadFinder is a sink whose ledger names each load by LoadIdentity and
// can be asked, without loading, what a load recorded: the last attempt
// of a load can land with its reply lost, and no attempt after it finds
// the commit (Loaded.Own), so the OTLP direct load asks before it answers
// its requests with an error (answered 503, stored all the same, their
// clients' retries would store them twice).
type LoadFinder interface {
	// LoadedAs returns the ledger rows recorded by the load named loadID,
	// none if no commit of it landed.
	LoadedAs(ctx context.Context, loadID string) ([]Range, error)
}

// Loaded is what a load wrote, per partition, after skipping rows already
// recorded. The pipeline commits Kafka offsets from it.
type Loaded struct {
	// LoadID names the load in the ledger: LoadIdentity of its files,
	// where the sink records that.
	LoadID string
	Ranges []Range
	// Own are positions the fence left out of this load that the ledger
	// records as committed by this load's identity (LoadIdentity): an
	// earlier attempt of the same staged files committed them, its reply
	// lost. Per ledger row, with the rows it counts; not in Ranges, which
	// are what this attempt wrote. A sink that reports them looks only
	// when its fence left positions out; the OTLP direct load answers
	// their requests as stored (a refusal would have them stored twice),
	// the pipeline ignores them (it commits Kafka offsets from Ranges,
	// which cover the fenced positions as they always did).
	Own []Range
	// Rejected are the main table's rows the sink sent to the dead-letter
	// table at the load instead (the table refused a value), one per row.
	// Only a sink that isolates such rows reports them (Databend); a
	// receiver answering after the load tells its client of them
	// (OTLP's partial success).
	Rejected []Rejected
}

// UncertainCommitError is the error of a load whose commit was sent and
// answered with an error: it may have landed all the same (its reply
// lost). Would is what it wrote had it landed. A later attempt that finds
// the commit in the ledger (Loaded.Own) cannot tell what it wrote
// otherwise: its own fence leaves those rows out, and the rows the
// committed attempt dead-lettered instead of loading (Would.Rejected) are
// owed to the requests that sent them (OTLP's partial success).
type UncertainCommitError struct {
	Err   error
	Would Loaded
}

func (e *UncertainCommitError) Error() string { return e.Err.Error() }
func (e *UncertainCommitError) Unwrap() error { return e.Err }

// Rejected is a row the table refused, dead-lettered with Reason.
type Rejected struct {
	TopicPartition
	Offset int64
	Reason string
}
