// Package config holds tracelake's one Config struct: defaults, loading from
// YAML (or the reference tool's JSON file), TRACELAKE_* environment
// overrides and validation that names every bad key.
package config

import (
	"runtime"
	"strings"
	"time"
)

// Config is the whole configuration of a tracelake process. Start from
// Default and load a file over it so that an explicit 0 or false is kept.
type Config struct {
	Kafka Kafka `yaml:"kafka"`
	// Workers is the number of Kafka consumers (and pipelines) in this
	// process, all in the same group. Parallelism is bounded by partitions.
	// Default 2.
	Workers int `yaml:"workers"`
	// Mode is raw (one raw row per message, the default) or transform (each
	// JSON object becomes a row of the user's existing table, sink.table).
	Mode    string  `yaml:"mode"`
	Batch   Batch   `yaml:"batch"`
	Load    Load    `yaml:"load"`
	Retry   Retry   `yaml:"retry"`
	Sink    Sink    `yaml:"sink"`
	Metrics Metrics `yaml:"metrics"`
	Merge   Merge   `yaml:"merge"`
	Tenancy Tenancy `yaml:"tenancy"`
	OTLP    OTLP    `yaml:"otlp"`
	GenAI   GenAI   `yaml:"genai"`
	Query   Query   `yaml:"query"`
	CDC     CDC     `yaml:"cdc"`
	// MaxInflightBytes caps the message bytes read from Kafka and not yet
	// loaded, per process; past it, fetching pauses until loads free
	// memory. Default 256MiB; the Kafka fetch size, the load size, DuckDB's
	// memory_limit and Go's heap limit follow from it (memory.go).
	MaxInflightBytes ByteSize `yaml:"max_inflight_bytes"`
	// ShutdownTimeout bounds the shutdown after a signal (loading what is
	// pending, committing). Past it the process exits 1; what was not
	// loaded is read again from Kafka on the next start. Default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`

	// unread are the keys of list items that an unknown key beside them
	// likely meant (merge.models[0].key for merge.models[0].kye), and
	// those items: the loading reported the typo, and Validate does not
	// report the key missing as well.
	unread []string
}

// Kafka is where records come from.
type Kafka struct {
	// Brokers are seed brokers, host:port. Default 127.0.0.1:9092 when
	// topics or topic_regex is set, none otherwise: a config without a
	// Kafka has its OTLP receivers load what they take (otlp.mode).
	Brokers []string `yaml:"brokers"`
	// Topics to consume; several topics share one group and one raw table.
	Topics []string `yaml:"topics"`
	// TopicRegex consumes every topic matching it (Go regexp syntax),
	// including topics created later (found within metadata_refresh).
	// Set either topics or topic_regex.
	TopicRegex string `yaml:"topic_regex"`
	// Group is the consumer group of every worker of every process.
	// Default tracelake; a loader of OTLP logs or metrics defaults to
	// tracelake-logs or tracelake-metrics (settle): loaders of different
	// signals in one group skip each other's requests on a shared topic.
	// Only a group left out: one given is kept, tracelake too.
	Group string `yaml:"group"`
	// StartOffset is where a partition with neither a ledger position nor a
	// committed offset starts: earliest (default) or latest (its end when
	// the run started). The start is committed before the partition is
	// read, so a crash before its first load does not move it.
	StartOffset string `yaml:"start_offset"`
	// MetadataRefresh bounds how long a partition added to a topic while
	// tracelake runs waits before it is consumed. Default 30s.
	MetadataRefresh Duration `yaml:"metadata_refresh"`
	// SessionTimeout is how long the group waits for a silent member (a
	// killed process) before moving its partitions. Default 45s.
	SessionTimeout Duration `yaml:"session_timeout"`
	// RebalanceTimeout is how long a rebalance waits for members to rejoin;
	// a revoke waits at most half of it for pending loads before the
	// partitions move (what did not load is fenced against the new owner).
	// Default 60s.
	RebalanceTimeout Duration `yaml:"rebalance_timeout"`
	// CommitTimeout bounds one offset commit. A commit that times out is
	// retried with the next load (the data is in the sink and its ledger
	// already; only the group's offset lags). A revoke waits for a commit
	// in flight, so this also bounds how long a slow coordinator can hold
	// a revoke. Default 10s.
	CommitTimeout Duration `yaml:"commit_timeout"`
	// ClientID is sent to the brokers; default tracelake.
	ClientID string `yaml:"client_id"`
	// Format of the messages: json (default: each message a JSON value,
	// stored in the raw table or, in transform mode, the user's), or
	// debezium, canal or maxwell (database change events, each change
	// routed to a changelog table of its source table: see CDC; DuckDB
	// only for now), or otlp_proto / otlp_json (OpenTelemetry, as the OpenTelemetry
	// Collector's Kafka exporter writes it: each message one OTLP export
	// request, decoded into one row per span or log record of otel_spans
	// or otel_logs, or per metric point of otel_metrics), on every sink.
	Format string `yaml:"format"`
	// Signal is what OTLP messages hold: traces (default), logs or
	// metrics (otel_metrics, one row per data point). The
	// Collector writes each signal to its own topic; run one tracelake
	// configuration per signal.
	Signal string `yaml:"signal"`
	// FetchMaxBytes is what a worker's buffered fetches may hold,
	// decompressed (kafka.FetchSizer asks Kafka for it divided by the
	// records' compression). Default (0) 1/32 of max_inflight_bytes per
	// worker, 1-50MiB (see FetchBytes).
	FetchMaxBytes ByteSize `yaml:"fetch_max_bytes"`
	// SASL and TLS settings of the reference's config file are carried here
	// so they are reported rather than silently ignored.
	SASL SASL `yaml:"sasl"`
	TLS  TLS  `yaml:"tls"`
}

// SASL authentication to the brokers.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: no SASL.
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	Password  string `yaml:"password" secret:"true"`
}

// TLS to the brokers.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs to trust; empty: the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate (mutual TLS), both or
	// neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the broker's certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify turns certificate checks off (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Batch says when the records read by one worker become one staged file.
// The first limit reached closes the batch.
type Batch struct {
	// MaxRecords per batch. Default 10000.
	MaxRecords int `yaml:"max_records"`
	// MaxBytes of messages (key, value and headers) per batch. Default 16MiB.
	MaxBytes ByteSize `yaml:"max_bytes"`
	// MaxInterval from the first record of a batch to its close. Default 10s.
	MaxInterval Duration `yaml:"max_interval"`
}

// Load says when staged files are loaded into the sink: max_files pending,
// or max_interval after the first pending file was staged, first wins.
type Load struct {
	// MaxFiles per load. Default 128.
	MaxFiles int `yaml:"max_files"`
	// MaxBytes of messages per load: a load closes once its files
	// reach it. Default (0) a sixteenth of max_inflight_bytes, none for Iceberg
	// (see LoadBytes).
	MaxBytes ByteSize `yaml:"max_bytes"`
	// MaxInterval after the first pending file. Default 5s.
	MaxInterval Duration `yaml:"max_interval"`
	// Compression of staged files: auto (default), none or zstd. auto is
	// zstd for Databend, whose files cross the network (about 4x smaller),
	// and none for DuckDB, whose staging is a local disk where zstd only
	// costs CPU.
	Compression string `yaml:"compression"`
}

// Retry of failed stages and loads: 1s, 2s, 4s … capped at MaxDelay, for
// ever until shutdown, always with the same staged files.
type Retry struct {
	// MaxDelay caps the backoff. Default 30m.
	MaxDelay Duration `yaml:"max_delay"`
}

// Sink is where records go.
type Sink struct {
	// Type is duckdb (default), databend or iceberg. Only duckdb is built.
	Type string `yaml:"type"`
	// Table is the raw table (raw mode) or the user's table (transform mode).
	// The DLQ is <table>_dlq and the ledger <table>_ledger. Default
	// trace_raw; with kafka.format otlp_*, otel_spans or otel_logs.
	Table    string   `yaml:"table"`
	DuckDB   DuckDB   `yaml:"duckdb"`
	Databend Databend `yaml:"databend"`
	Iceberg  Iceberg  `yaml:"iceberg"`
}

// S3 is an S3-compatible object store.
type S3 struct {
	// Endpoint of an S3-compatible server (MinIO, versitygw, …); empty:
	// AWS. Such servers are addressed by path (bucket in the path).
	Endpoint        string `yaml:"endpoint"`
	Region          string `yaml:"region"`
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key" secret:"true"`
}

// Iceberg sink settings: Apache Iceberg tables (raw and dead-letter) in a
// SQL catalog, data files in a warehouse directory.
type Iceberg struct {
	// Catalog is the SQL catalog's database: a SQLite file path (default
	// ./tracelake-catalog.db, for one machine) or a postgres:// URL (the
	// catalog for many instances; a password in it is a secret); or the
	// http(s):// URL of a REST catalog (see REST). Only a URL is a
	// secret: a file path holds no password and is printed as is.
	Catalog string `yaml:"catalog" secret:"url"`
	// Warehouse is where tables' data and metadata files go with a SQL
	// catalog: a directory (default ./tracelake-warehouse) or
	// s3://bucket/path. A REST catalog decides that itself.
	Warehouse string `yaml:"warehouse"`
	// REST authenticates to a REST catalog.
	REST IcebergREST `yaml:"rest"`
	// S3 reaches an s3:// warehouse; empty fields fall back to the AWS
	// SDK's usual sources (AWS_* environment, shared config).
	S3 S3 `yaml:"s3"`
	// Namespace of the tables. Default tracelake.
	Namespace string `yaml:"namespace"`
	// Adopt lets tracelake write to an existing table that has data but
	// no tracelake positions (written by something else): its partitions
	// start from the group's committed offsets. Without it such a table is
	// refused, never silently read from the start. Default false.
	Adopt bool `yaml:"adopt"`
	// CatalogName is the catalog's name. A SQL catalog stores it with
	// every table (column catalog_name): an engine reading the same
	// catalog database (Spark's or Trino's JDBC catalog) must be
	// configured with the same name to see the tables. Default tracelake.
	CatalogName string `yaml:"catalog_name"`
	// TableProperties are set on the tables tracelake creates, over its
	// own defaults (for example write.target-file-size-bytes,
	// write.metadata.metrics.default, format-version). Tables that exist
	// keep theirs.
	TableProperties map[string]string `yaml:"table_properties"`
	// PartitionBy is a JSON path of the value (such as $.start_time)
	// holding each record's event time, an RFC 3339 string or a number
	// since the Unix epoch: the raw table's event_time, by whose day it is
	// partitioned, so that a replayed backlog lands in the days its events
	// belong to. Default "": the record's Kafka timestamp. Records without
	// a time there get their Kafka timestamp.
	PartitionBy string `yaml:"partition_by"`
	// CommitInterval is how often each process commits its loads: every
	// load commits a snapshot that each later commit and every reader
	// carry until it expires, so the workers' batches wait in data files
	// and go in together, one snapshot per table per interval (sooner
	// when load.max_files batches wait). It takes the place of
	// load.max_interval. Default 60s.
	CommitInterval Duration `yaml:"commit_interval"`
	// Maintenance is the maintenance `tracelake run` does itself.
	Maintenance IcebergMaintenance `yaml:"maintenance"`
}

// IcebergMaintenance schedules compaction, manifest rewriting and
// snapshot expiry in `tracelake run` (internal/sink/iceberg/maintainer.go).
// Of the processes of a group, one at a time does it: the one holding a
// lease committed to the raw table.
type IcebergMaintenance struct {
	// Every is how often a round runs. Default 0: off, maintenance is left
	// to `tracelake compact`, `expire` (cron, or another engine). 5m keeps
	// the current day at about small_files small files.
	Every Duration `yaml:"every"`
	// TargetFileSize is the size of compacted files, and of the files a
	// worker's loads write where the table sets no
	// write.target-file-size-bytes. Default 128MiB.
	TargetFileSize ByteSize `yaml:"target_file_size"`
	// SmallFiles is how many small files (under 3/4 of target_file_size)
	// the current day's partition may hold before a round compacts it;
	// days that ended are compacted whatever their count. Default 32.
	SmallFiles int `yaml:"small_files"`
	// ExpireAfter and RetainLast: snapshots older than ExpireAfter beyond
	// the newest RetainLast are expired each round. Defaults 24h and 1.
	ExpireAfter Duration `yaml:"expire_after"`
	RetainLast  int      `yaml:"retain_last"`
}

// IcebergREST authenticates to an Iceberg REST catalog and names its
// warehouse.
type IcebergREST struct {
	// Credential is OAuth2 client credentials, "client_id:client_secret",
	// exchanged for a token at the catalog's token endpoint.
	Credential string `yaml:"credential" secret:"true"`
	// Token is a bearer token sent as is.
	Token string `yaml:"token" secret:"true"`
	// Warehouse is the catalog's warehouse (a name or a location, as the
	// catalog expects).
	Warehouse string `yaml:"warehouse"`
	// Scope is the OAuth2 scope asked for with Credential (default the
	// catalog's, PRINCIPAL_ROLE:ALL in iceberg-go).
	Scope string `yaml:"scope"`
	// OAuth2ServerURI is the token endpoint Credential is exchanged at,
	// when it is not the catalog's own /v1/oauth/tokens (an identity
	// provider's).
	OAuth2ServerURI string `yaml:"oauth2_server_uri"`
	// SigV4 signs every request with AWS Signature Version 4 (AWS Glue's
	// and S3 Tables' REST endpoints), with credentials from the AWS SDK's
	// usual sources.
	SigV4 bool `yaml:"sigv4"`
	// SigV4Region and SigV4Service name what is signed for (service
	// default execute-api; glue for AWS Glue, s3tables for S3 Tables).
	SigV4Region  string `yaml:"sigv4_region"`
	SigV4Service string `yaml:"sigv4_service"`
}

// DuckDB sink settings.
type DuckDB struct {
	// Path of the database file. Default ./tracelake.duckdb.
	Path string `yaml:"path"`
	// StageDir holds staged batch files until they are loaded. Default
	// <path>.stage next to the database.
	StageDir string `yaml:"stage_dir"`
	// MemoryLimit caps DuckDB's own memory (its buffer pool, on top of
	// max_inflight_bytes). Default (0) max_inflight_bytes, see
	// DuckDBMemoryLimit.
	MemoryLimit ByteSize `yaml:"memory_limit"`
	// Threads DuckDB may use; 0: one per core but one (left to the
	// pipeline in run and demo), at most one per 64 MiB of the memory
	// limit (each reading thread holds a 32 MiB buffer).
	Threads int `yaml:"threads"`
	// JSONCompression is how the tables tracelake creates store their
	// JSON columns (the raw table's raw_data and record_metadata): auto
	// (the default: DuckDB picks, FSST or a dictionary for traces), zstd
	// (the raw table's, in a new database file: for ~1 KB values a third
	// less CPU per load and a quarter of auto's file, but a scan holds up
	// to 2,048 values decompressed within memory_limit, so large values
	// (~128 KB on average at 256 MiB) fail scans; docs/BENCHMARKS.md,
	// "2026-12-05, json_zstd") or none (ingest 1.2-1.75x faster than auto, the file
	// about twice as big; "2026-11-30, json_compression"). A table that
	// exists keeps what it was created with.
	JSONCompression string `yaml:"json_compression"`
}

// Databend sink settings. Batches are uploaded to a stage and loaded with
// COPY INTO, together with their ledger rows, in one transaction.
type Databend struct {
	// DSN as the reference's databendDSN and databend-go take it:
	// databend://user:password@host:port/database?sslmode=disable, or
	// https://user:password@host:443. presigned_url_disabled=true uploads
	// through the query node instead of a presigned URL.
	DSN string `yaml:"dsn" secret:"true"` // user:password@host: the password is a secret
	// Stage receives the batch files: ~ (the user stage, default) or the
	// name of a stage.
	Stage string `yaml:"stage"`
	// Prefix is the path in the stage under which files are put. Default
	// tracelake/<table>/.
	Prefix string `yaml:"prefix"`
	// Purge removes loaded files from the stage after their load commits.
	// Default true.
	Purge bool `yaml:"purge"`
	// DisableVariantCheck loads JSON Databend would reject as a VARIANT
	// (COPY's DISABLE_VARIANT_CHECK); tracelake already sends only valid
	// JSON. Default false.
	DisableVariantCheck bool `yaml:"disable_variant_check"`
	// StreamingLoad (the reference's useStreamingLoad) uploads files
	// through the query node (/v1/upload_to_stage) instead of presigned
	// URLs to object storage: only the query endpoint must be reachable.
	// Loads stay exactly-once COPY transactions; Databend's streaming-load
	// endpoint cannot join a transaction (see the README). Default false.
	StreamingLoad bool `yaml:"streaming_load"`
	// Uploads is how many batch uploads may run at once per process.
	// Default 8.
	Uploads int `yaml:"uploads"`
	// Timeout bounds each HTTP request to Databend. Default 5m.
	Timeout Duration `yaml:"timeout"`
}

// Tenancy says which tenant each OpenTelemetry row belongs to (its
// tenant_id column).
type Tenancy struct {
	// KafkaHeader is the Kafka header holding a record's tenant id; ""
	// for none (every row is Default's), refused with otlp.mode forward,
	// which writes the tenant there. Default X-Scope-OrgID: the receivers' forward writes it,
	// and the OpenTelemetry Collector's Kafka exporter passes the client's
	// X-Scope-OrgID under that name (include_metadata_keys). An id that is
	// not valid (Grafana Mimir's rules: at most 150 bytes of letters,
	// digits and !-_.*'(), not . or ..) sends the record to the
	// dead-letter table.
	KafkaHeader string `yaml:"kafka_header"`
	// Default is the tenant of records and requests without one. Default
	// "default".
	Default string `yaml:"default"`
	// Required refuses an OTLP request without a tenant (HTTP 401, gRPC
	// Unauthenticated) instead of giving it the default. Default false.
	Required bool `yaml:"required"`
}

// GenAI configures genai_operations: a row per span that marks an LLM
// operation (OpenTelemetry GenAI, OpenInference, Traceloop or Claude Code
// conventions), with its tokens and cost, loaded with its span.
type GenAI struct {
	// Operations is auto (default: on when loading kafka.signal traces,
	// on every sink), on or off.
	Operations string `yaml:"operations"`
	// Table is the operations table's name. Default genai_operations.
	Table string `yaml:"table"`
	// CaptureContent keeps the input and output messages spans carry
	// (prompts and answers: personal data, mind where the table goes).
	// Default false: the columns stay null.
	CaptureContent bool `yaml:"capture_content"`
	// PricesFile is a price table exported from genai-prices
	// (scripts/export-genai-prices.sh), used instead of the one built in;
	// `tracelake prices update --file F` writes it. Default "": built in.
	PricesFile string `yaml:"prices_file"`
}

// GenAIOperations reports whether genai_operations is loaded: from
// OpenTelemetry spans only, "on" as "auto" (Validate refuses "on"
// elsewhere). The other signals' configurations of a load-mode run
// (ForSignal) share genai.operations: "on" taken as such gave otel_logs
// and otel_metrics genai_operations as their derived table, and verify
// then checked the spans' operations against log records and points (an
// orphan each, or no trace_id column at all).
func (c *Config) GenAIOperations() bool {
	switch c.GenAI.Operations {
	case "on", "auto":
		return c.DecodesOTLP() && c.Kafka.Signal == SignalTraces
	}
	return false
}

// OTLP configures the OTLP receivers. In forward mode each accepted
// request is forwarded to Kafka (its signal's topic) and answered once the
// brokers acknowledged it; tracelake processes consuming those topics
// (kafka.format otlp_proto) load them. In load mode the requests of
// kafka.signal are loaded into sink.table by this process and answered
// once the load committed. A process may run the receivers alone (no
// kafka.topics) or beside its consumer.
type OTLP struct {
	// Mode is forward or load. Default: forward when the config names a
	// Kafka (kafka.brokers, kafka.topics or kafka.topic_regex), load
	// without one, so that receivers alone never wait on a Kafka that is
	// not there. forward without any of them is refused (it needs
	// kafka.brokers).
	Mode string `yaml:"mode"`
	// Instance is, in load mode, this process's partition of the ledger
	// topic otlp:<signal>: processes loading into the same tables need
	// different ones. Default 0.
	Instance int32 `yaml:"instance"`
	// Signals are, in load mode, the signals the receivers take, each
	// loaded into its own table of the sink: kafka.signal's into
	// sink.table, another's into its OpenTelemetry table (otel_spans,
	// otel_logs, otel_metrics) in the same database or catalog, with its
	// own ledger and dedup model. A request of a signal not listed is
	// refused (404). Default [kafka.signal]; [traces, logs, metrics] for
	// one process taking a Collector's or SDK's every signal (and
	// answering every Grafana API of query.http).
	Signals []string `yaml:"signals"`
	// HTTP is the OTLP/HTTP listen address (host:port; 4318 by
	// convention); "" (default) leaves it off.
	HTTP string `yaml:"http"`
	// GRPC is the OTLP/gRPC listen address (4317 by convention); "" off.
	GRPC string `yaml:"grpc"`
	// MaxBodyBytes bounds one request after decompression (HTTP 413, gRPC
	// ResourceExhausted past it). In forward mode a request whose message
	// the broker refuses alone, compressed, as past its topic's
	// max.message.bytes (Kafka's default is 1MiB) is answered 413 too:
	// give the topics a limit this large. Default 8MiB.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// MaxConcurrentRequests bounds the requests in progress at once (HTTP
	// 429, gRPC Unavailable past it, both with a retry delay); 0 for no
	// bound. Bodies read are held within max_inflight_bytes too; those
	// still being read take up to this × max_body_bytes. Default 64.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests"`
	// ReadTimeout bounds how long a request may take to arrive, its
	// headers and body (HTTP) or its message once its headers came
	// (gRPC): a slower one is dropped and its place among
	// max_concurrent_requests freed, so that stalled clients cannot hold
	// them all. 0 for no bound. Default 1m.
	ReadTimeout Duration `yaml:"read_timeout"`
	// Forward names the topic of each signal.
	Forward OTLPForward `yaml:"forward"`
	// TLS serves both receivers over TLS.
	TLS ReceiverTLS `yaml:"tls"`
	// TokensFile, when set, requires a bearer token of that file on every
	// request, and the token must hold the request's tenant (401 / 403):
	// for writing at the receivers, for reading at the query endpoints
	// (the read side, when served; the same file and rules, see
	// tenancy.Resolver). Each line is a token and its tenants, a
	// comma-separated list or * for any: either one list, which the token
	// may write and not read (`s3cr3t team-a,team-b`, the form from before
	// reads had their own: tenancy.Tokens), or fields write= and read=, in
	// any order, either left out, granting nothing that way
	// (`s3cr3t write=team-a read=team-a,team-b`); # starts a
	// comment. A malformed line, an unknown field or a token on two
	// lines is an error naming the line: at start, tracelake does not
	// start; on a reload, the previous tokens stay. The file is read
	// again within a second of a change. Default "": no tokens. See
	// README.
	TokensFile string `yaml:"tokens_file"`
}

// Query configures the read side: SQL over the tables while they load
// (DuckDB: served by `tracelake run`; Iceberg: by `tracelake serve`).
// Reads are read-only and scoped to one tenant, decided as the receivers
// decide writes: the bearer token of otlp.tokens_file (its read
// tenants), X-Scope-OrgID, else tenancy.default unless tenancy.required.
type Query struct {
	// FlightSQL is the Arrow Flight SQL listen address (host:port), for
	// JDBC, ODBC and ADBC clients; "" (default) serves none.
	FlightSQL string `yaml:"flight_sql"`
	// HTTP is the listen address (host:port) of the Grafana APIs: Tempo
	// over otel_spans, Loki over otel_logs, Prometheus over otel_metrics,
	// all on one listener (each datasource's URL is http://HTTP); ""
	// (default) serves none. A process answers the APIs of the tables it
	// reads (see README, "Grafana").
	HTTP string `yaml:"http"`
	// TLS serves Flight SQL and the HTTP APIs over TLS (mutual TLS with
	// client_ca_file), as otlp.tls does the receivers.
	TLS ReceiverTLS `yaml:"tls"`
	// SharedTables are tables without a tenant_id column that every
	// tenant may read whole; every other such table (the raw and
	// dead-letter tables, the ledger) is the operator's alone. Default none.
	SharedTables []string `yaml:"shared_tables"`
	// MaxConcurrent bounds the queries running at once per process; more
	// wait. Default 4.
	MaxConcurrent int `yaml:"max_concurrent"`
	// Timeout bounds each query, from its start to its last batch read
	// (the engine is interrupted past it): a runaway query does not hold
	// the loading process's memory and threads for good. 0 for none.
	// Default 10m.
	Timeout Duration `yaml:"timeout"`
	// YieldToLoads makes reads of DuckDB in the loading process give way
	// to the loads: a query waits for the loads in flight to end before it
	// runs and before each batch after its first, each wait at most this
	// long (then it goes on by one step, so loads that never pause slow a
	// read down but never stop it). Reads are slower while loads run, by
	// design: ingest keeps its cores. 0 turns it off (reads and loads
	// share the cores). Default 1s.
	YieldToLoads Duration `yaml:"yield_to_loads"`
	// Refresh is how often `tracelake serve` looks for the Iceberg
	// tables' new snapshots: a read sees a load at most this long after
	// it committed. Default 5s.
	Refresh Duration `yaml:"refresh"`
}

// OTLPSignalHeader is the Kafka header in which the receivers' forward
// names a message's signal (otel.SignalHeader).
const OTLPSignalHeader = "otlp-signal"

// OTLPTopicSignalsHeader is the Kafka header in which the receivers'
// forward names every signal it forwards to the message's topic (comma
// separated): a loader skips another signal's message only on a topic
// its own signal shares, and dead-letters it elsewhere (otel.AppendRows).
const OTLPTopicSignalsHeader = "otlp-topic-signals"

// OTLPForward are the topics accepted requests are written to. Defaults
// are the OpenTelemetry Collector Kafka exporter's: otlp_spans, otlp_logs,
// otlp_metrics.
type OTLPForward struct {
	// Topic, when set, takes every signal (each message says its signal
	// in the header otlp-signal; a loader skips the other signals'
	// messages): one topic instead of three.
	Topic        string `yaml:"topic"`
	TracesTopic  string `yaml:"traces_topic"`
	LogsTopic    string `yaml:"logs_topic"`
	MetricsTopic string `yaml:"metrics_topic"`
}

// ReceiverTLS is the receivers' certificate, and for mutual TLS the CAs
// client certificates must chain to.
type ReceiverTLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// ForwardTopics maps each signal to the topic its requests are forwarded
// to.
func (o OTLPForward) ForwardTopics() map[string]string {
	if o.Topic != "" {
		return map[string]string{SignalTraces: o.Topic, SignalLogs: o.Topic, SignalMetrics: o.Topic}
	}
	return map[string]string{SignalTraces: o.TracesTopic, SignalLogs: o.LogsTopic, SignalMetrics: o.MetricsTopic}
}

// Receivers reports whether an OTLP receiver is configured.
func (c *Config) Receivers() bool { return c.OTLP.HTTP != "" || c.OTLP.GRPC != "" }

// otlp.mode values.
const (
	OTLPForwardMode = "forward"
	OTLPLoadMode    = "load"
)

// DefaultBroker is kafka.brokers when the config consumes topics and names
// no broker.
const DefaultBroker = "127.0.0.1:9092"

// OTLPMode is otlp.mode, or where it is not set its default: forward when
// the config names a Kafka (brokers, topics or topic_regex), load without
// one.
func (c *Config) OTLPMode() string {
	switch {
	case c.OTLP.Mode != "":
		return c.OTLP.Mode
	case len(c.Kafka.Brokers) > 0 || c.Consumes():
		return OTLPForwardMode
	}
	return OTLPLoadMode
}

// LoadsReceived reports whether the receivers load their requests into
// sink.table themselves (otlp.mode load).
func (c *Config) LoadsReceived() bool { return c.Receivers() && c.OTLPMode() == OTLPLoadMode }

// LoadedSignals are the signals the receivers of a load-mode run take
// (otlp.signals, by default kafka.signal alone); nil in forward mode.
func (c *Config) LoadedSignals() []string {
	switch {
	case !c.LoadsReceived():
		return nil
	case len(c.OTLP.Signals) == 0:
		return []string{c.Kafka.Signal}
	}
	return c.OTLP.Signals
}

// signalTable is the OpenTelemetry table of each signal (otel.TableOf's
// names; config does not import the decoder).
var signalTable = map[string]string{SignalTraces: "otel_spans", SignalLogs: "otel_logs", SignalMetrics: "otel_metrics"}

// ForSignal is the configuration of signal's rows in a load-mode run
// taking several (otlp.signals): c itself for kafka.signal, else a copy
// loading signal into its OpenTelemetry table, with that table's stage
// directory beside c's.
func (c *Config) ForSignal(signal string) *Config {
	if signal == c.Kafka.Signal {
		return c
	}
	o := *c
	o.Kafka.Signal = signal
	o.Sink.Table = signalTable[signal]
	o.Sink.DuckDB.StageDir = c.StageDir() + "." + o.Sink.Table
	return &o
}

// SignalConfigs are the configurations of the tables a run of c loads:
// c's own (kafka.signal's) first, then, in a load-mode run taking several
// signals (otlp.signals), each other signal's (ForSignal). A command about
// the tables of a run goes through them all: one that looked at c alone
// left the other signals' tables out (their dedup models unmerged, their
// maintenance undone, their rows unverified).
func (c *Config) SignalConfigs() []*Config {
	out := []*Config{c}
	for _, sig := range c.LoadedSignals() {
		if sig != c.Kafka.Signal {
			out = append(out, c.ForSignal(sig))
		}
	}
	return out
}

// GenAIConfig is the configuration of the table genai_operations is
// derived from (GenAIOperations): the spans', c itself with kafka.signal
// traces, else the traces configuration of a load-mode run taking traces
// among otlp.signals; nil when none is. The commands about the operations
// (merge --rebuild, report, the status page's /report) look there, not at
// c: with kafka.signal logs c loads no operations though the run does.
func (c *Config) GenAIConfig() *Config {
	for _, sc := range c.SignalConfigs() {
		if sc.GenAIOperations() {
			return sc
		}
	}
	return nil
}

// Forwards reports whether the receivers forward their requests to Kafka
// (otlp.mode forward).
func (c *Config) Forwards() bool { return c.Receivers() && c.OTLPMode() == OTLPForwardMode }

// Consumes reports whether the process consumes Kafka topics.
func (c *Config) Consumes() bool { return len(c.Kafka.Topics) > 0 || c.Kafka.TopicRegex != "" }

// Metrics endpoint: /metrics (Prometheus), /healthz, /readyz.
type Metrics struct {
	// Listen is host:port; "" turns the endpoint off. Default
	// 127.0.0.1:9464 (loopback only: the endpoint has no authentication).
	Listen string `yaml:"listen"`
}

// Sink types and modes accepted by Validate.
const (
	SinkDuckDB   = "duckdb"
	SinkDatabend = "databend"
	SinkIceberg  = "iceberg"

	ModeRaw       = "raw"
	ModeTransform = "transform"

	// kafka.format: json (FormatJSON, as for models) or OTLP.
	FormatOTLPProto = "otlp_proto"
	FormatOTLPJSON  = "otlp_json"

	SignalTraces  = "traces"
	SignalLogs    = "logs"
	SignalMetrics = "metrics"

	// DefaultTable is sink.table unless set; with an OTLP format the
	// default is the signal's table (settle).
	DefaultTable = "trace_raw"
)

// DecodesOTLP reports whether the rows are OpenTelemetry: the messages
// are (kafka.format otlp_proto or otlp_json), or the receivers load
// their requests (otlp.mode load).
func (c *Config) DecodesOTLP() bool {
	return c.Kafka.Format == FormatOTLPProto || c.Kafka.Format == FormatOTLPJSON || c.LoadsReceived()
}

// settle fills in defaults that follow from other keys once the file,
// the environment and the flags are read: otlp.mode from the Kafka keys,
// kafka.brokers for a config that consumes topics and leaves them out, and,
// with OpenTelemetry rows, sink.table left at its default names the
// signal's table.
func (c *Config) settle() {
	c.OTLP.Mode = c.OTLPMode()
	// Only brokers left out (nil) take the default: a list given empty
	// (brokers: [], an empty TRACELAKE_KAFKA_BROKERS or --brokers=, a
	// script's unset variable) is refused by Validate, not pointed at a
	// Kafka nobody named.
	if c.Kafka.Brokers == nil && c.Consumes() {
		c.Kafka.Brokers = []string{DefaultBroker}
	}
	// Databend's SQL names a stage @name (and the user stage @~), so
	// users write it so, as the reference config's userStage does.
	// "@" alone names none, and is refused as given.
	if st := c.Sink.Databend.Stage; len(st) > 1 && st[0] == '@' {
		c.Sink.Databend.Stage = st[1:]
	}
	if c.DecodesOTLP() && c.Sink.Table == DefaultTable {
		c.Sink.Table = signalTable[c.Kafka.Signal]
	}
	if c.CapturesChanges() && c.Sink.Table == DefaultTable {
		c.Sink.Table = cdcTable
	}
	// A loader skips another signal's requests on a topic the receivers
	// share between signals (otlp.forward.topic) and commits its group
	// past them: each signal's loader needs a group of its own, or one
	// commits past the requests the other has still to load (acknowledged
	// to their clients, in no table). Traces keep the plain default,
	// which deployments already use; a loader of a group new to it
	// resumes from its ledger, not the group's offsets (pipeline's
	// adjustOffsets), so the change loses and doubles nothing.
	// Only a group left out (groupLeftOut): a group given is kept, even
	// tracelake.
	if c.Kafka.Group == groupLeftOut {
		c.Kafka.Group = DefaultGroup
		if (c.Kafka.Format == FormatOTLPProto || c.Kafka.Format == FormatOTLPJSON) && c.Kafka.Signal != SignalTraces {
			c.Kafka.Group = DefaultGroup + "-" + c.Kafka.Signal
		}
	}
}

// DefaultGroup is kafka.group's default (of a loader of OTLP traces).
const DefaultGroup = "tracelake"

// FormerGroup is the group the releases before loaders of OTLP logs and
// metrics had defaults of their own ran such a loader in, by default
// (tracelake), when c is in its signal's default group now; "" for
// other configs. With start_offset latest a partition with no offset in
// the new group and no ledger position starts where the former group's
// committed offset is (pipeline's latestStarts), not at its end.
func (c *Config) FormerGroup() string {
	if (c.Kafka.Format == FormatOTLPProto || c.Kafka.Format == FormatOTLPJSON) && c.Kafka.Signal != SignalTraces &&
		c.Kafka.Group == DefaultGroup+"-"+c.Kafka.Signal {
		return DefaultGroup
	}
	return ""
}

// defaultLoadInterval is load.max_interval's default.
const defaultLoadInterval = 5 * time.Second

// Default returns the configuration every file is loaded over.
func Default() *Config {
	workers := 2
	if n := runtime.NumCPU(); n < workers {
		workers = n
	}
	return &Config{
		Kafka: Kafka{
			Group:            DefaultGroup,
			StartOffset:      "earliest",
			MetadataRefresh:  Duration(30 * time.Second),
			SessionTimeout:   Duration(45 * time.Second),
			RebalanceTimeout: Duration(60 * time.Second),
			CommitTimeout:    Duration(10 * time.Second),
			ClientID:         "tracelake",
			Format:           FormatJSON,
			Signal:           SignalTraces,
		},
		Tenancy: Tenancy{KafkaHeader: "X-Scope-OrgID", Default: "default"},
		Query: Query{MaxConcurrent: 4, Refresh: Duration(5 * time.Second), Timeout: Duration(10 * time.Minute),
			YieldToLoads: Duration(time.Second)},
		GenAI: GenAI{Operations: "auto", Table: "genai_operations"},
		CDC:   CDC{ReadyDelay: Duration(time.Minute)},
		// Set here, not only filled in where merges run, so that
		// tracelake config prints the concurrency that runs.
		Merge: Merge{Concurrency: DefaultMergeConcurrency},
		OTLP: OTLP{MaxBodyBytes: 8 << 20, MaxConcurrentRequests: 64, ReadTimeout: Duration(time.Minute), Forward: OTLPForward{
			TracesTopic: "otlp_spans", LogsTopic: "otlp_logs", MetricsTopic: "otlp_metrics"}},
		Workers:          workers,
		Mode:             ModeRaw,
		Batch:            Batch{MaxRecords: 10000, MaxBytes: 16 << 20, MaxInterval: Duration(10 * time.Second)},
		Load:             Load{MaxFiles: 128, MaxInterval: Duration(defaultLoadInterval), Compression: "auto"},
		Retry:            Retry{MaxDelay: Duration(30 * time.Minute)},
		Metrics:          Metrics{Listen: "127.0.0.1:9464"},
		ShutdownTimeout:  Duration(30 * time.Second),
		MaxInflightBytes: defaultInflightBytes,
		Sink: Sink{
			Type:     SinkDuckDB,
			Table:    DefaultTable,
			DuckDB:   DuckDB{Path: "./tracelake.duckdb", JSONCompression: "auto"},
			Databend: Databend{Stage: "~", Purge: true, Uploads: 8, Timeout: Duration(5 * time.Minute)},
			Iceberg: Iceberg{Catalog: "./tracelake-catalog.db", Warehouse: "./tracelake-warehouse", Namespace: "tracelake", CatalogName: "tracelake",
				CommitInterval: Duration(time.Minute),
				Maintenance:    IcebergMaintenance{TargetFileSize: 128 << 20, SmallFiles: 32, ExpireAfter: Duration(24 * time.Hour), RetainLast: 1}},
		},
	}
}

// LoadInterval is how long a staged batch waits for its load at most:
// load.max_interval, or with Iceberg its commit interval.
func (c *Config) LoadInterval() time.Duration {
	if c.Sink.Type == SinkIceberg {
		return c.Sink.Iceberg.CommitInterval.D()
	}
	return c.Load.MaxInterval.D()
}

// DLQTable is the dead-letter table of the configured table.
func (c *Config) DLQTable() string { return c.Sink.Table + "_dlq" }

// LedgerTable is the ledger table of the configured table.
func (c *Config) LedgerTable() string { return c.Sink.Table + "_ledger" }

// Zstd reports whether staged files are compressed (load.compression,
// auto resolved for the sink).
func (c *Config) Zstd() bool {
	return c.Load.Compression == "zstd" || c.Load.Compression == "auto" && c.Sink.Type == SinkDatabend
}

// DatabendPrefix is the stage path of the Databend sink's files.
func (c *Config) DatabendPrefix() string {
	if c.Sink.Databend.Prefix != "" {
		return strings.TrimSuffix(c.Sink.Databend.Prefix, "/") + "/"
	}
	return "tracelake/" + c.Sink.Table + "/"
}

// StageDir is where the DuckDB sink stages files.
func (c *Config) StageDir() string {
	if c.Sink.DuckDB.StageDir != "" {
		return c.Sink.DuckDB.StageDir
	}
	return c.Sink.DuckDB.Path + ".stage"
}
