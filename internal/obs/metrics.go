// Package obs makes tracelake observable: Prometheus metrics, health and
// readiness endpoints, served on metrics.listen.
package obs

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracelake/tracelake/internal/genai"
)

// Metrics are every tracelake_ metric. Create them once with New; hot paths
// update them per poll, batch or load, never per record lookup by label.
type Metrics struct {
	Registry *prometheus.Registry

	ConsumedRecords *prometheus.CounterVec // topic
	ConsumedBytes   *prometheus.CounterVec // topic
	Lag             *prometheus.GaugeVec   // topic, partition
	Committed       *prometheus.GaugeVec   // topic, partition
	Freshness       prometheus.Histogram
	Batches         prometheus.Counter
	StagedFiles     prometheus.Counter
	StagedBytes     prometheus.Counter
	Loads           prometheus.Counter
	FilesPerLoad    prometheus.Histogram
	LoadDuration    prometheus.Histogram
	Retries         *prometheus.CounterVec // stage
	DLQRecords      *prometheus.CounterVec // reason
	InflightBytes   prometheus.Gauge
	FetchPauses     prometheus.Counter
	LostRecords     *prometheus.CounterVec
	LogResets       *prometheus.CounterVec // topic
	Rebalances      *prometheus.CounterVec // event

	MergeRawRows     *prometheus.CounterVec   // model: raw rows merged
	MergeChanged     *prometheus.CounterVec   // model: target rows inserted, updated or deleted
	MergeRejected    *prometheus.CounterVec   // model
	MergeFailures    *prometheus.CounterVec   // model
	MergeDuration    *prometheus.HistogramVec // model
	MergeLastSuccess *prometheus.GaugeVec     // model: unix time of the last successful merge

	IcebergCommitDuration  *prometheus.HistogramVec // table
	IcebergCommitConflicts *prometheus.CounterVec   // table
	IcebergSnapshots       *prometheus.GaugeVec     // table
	IcebergMetadataBytes   *prometheus.GaugeVec     // table

	OTLPRequests *prometheus.CounterVec // protocol, signal, outcome
	OTLPItems    *prometheus.CounterVec // signal: spans, log records or points accepted
}

// New registers the metrics in a new registry (with the Go and process
// collectors).
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		ConsumedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_consumed_records_total",
			Help: "Records read from Kafka."}, []string{"topic"}),
		ConsumedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_consumed_bytes_total",
			Help: "Bytes of records read from Kafka: keys, values and headers."}, []string{"topic"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tracelake_partition_lag_records",
			Help: "High watermark minus the next offset to load, per owned partition."}, []string{"topic", "partition"}),
		Committed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tracelake_partition_committed_offset",
			Help: "Last offset committed to the consumer group, per partition."}, []string{"topic", "partition"}),
		Freshness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tracelake_freshness_seconds",
			Help:    "Time from a message's create_time to the commit of the load that stored it.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16)}),
		Batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "tracelake_batches_total",
			Help: "Batches closed."}),
		StagedFiles: prometheus.NewCounter(prometheus.CounterOpts{Name: "tracelake_staged_files_total",
			Help: "Batches staged as files."}),
		StagedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tracelake_staged_bytes_total",
			Help: "Bytes staged (after compression)."}),
		Loads: prometheus.NewCounter(prometheus.CounterOpts{Name: "tracelake_loads_total",
			Help: "Load transactions committed."}),
		FilesPerLoad: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tracelake_files_per_load",
			Help: "Staged files per load.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		LoadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tracelake_load_duration_seconds",
			Help: "Duration of successful loads, retries included.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_retries_total",
			Help: "Failed attempts that were retried, by stage."}, []string{"stage"}),
		DLQRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_dlq_records_total",
			Help: "Records written to the dead-letter table, by reason."}, []string{"reason"}),
		InflightBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tracelake_inflight_bytes",
			Help: "Bytes of records (keys, values and headers; an OTLP message's decoded rows) read from Kafka and held in memory: not yet loaded, or with a sink that stages into files (Iceberg) not yet staged."}),
		LostRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_lost_records_total",
			Help: "Records Kafka deleted (retention) before tracelake loaded them; each gap is logged and shown by verify."}, []string{"topic"}),
		LogResets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_log_resets_total",
			Help: "Partitions found with a log that ends below the ledger's position (the topic deleted and recreated, or its log truncated): the run stops, and verify fails."}, []string{"topic"}),
		FetchPauses: prometheus.NewCounter(prometheus.CounterOpts{Name: "tracelake_fetch_pauses_total",
			Help: "Times a worker paused fetching because max_inflight_bytes was reached."}),
		Rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_rebalances_total",
			Help: "Partition assignment changes seen by the workers, by event."}, []string{"event"}),
		MergeRawRows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_merge_raw_rows_total",
			Help: "Raw rows read by merges, by model."}, []string{"model"}),
		MergeChanged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_merge_changed_rows_total",
			Help: "Target rows inserted, updated or deleted by merges, by model."}, []string{"model"}),
		MergeRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_merge_rejected_rows_total",
			Help: "Raw rows written to <model>_rejects, by model."}, []string{"model"}),
		MergeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_merge_failures_total",
			Help: "Merges that failed (and changed nothing), by model."}, []string{"model"}),
		MergeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tracelake_merge_duration_seconds",
			Help: "Duration of successful merges, by model.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}, []string{"model"}),
		MergeLastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tracelake_merge_last_success_timestamp_seconds",
			Help: "Unix time of the last successful merge, by model: alert when it is old."}, []string{"model"}),
		IcebergCommitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tracelake_iceberg_commit_duration_seconds",
			Help: "Duration of the catalog commits of loads, landed or lost, by table.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"table"}),
		IcebergCommitConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_iceberg_commit_conflicts_total",
			Help: "Load commits lost to another writer (retried), by table."}, []string{"table"}),
		IcebergSnapshots: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tracelake_iceberg_snapshots",
			Help: "Snapshots in the table's metadata after the last load commit: run tracelake expire when it grows."}, []string{"table"}),
		IcebergMetadataBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tracelake_iceberg_metadata_bytes",
			Help: "Size of the table's metadata file after the last load commit (rewritten and read on every commit)."}, []string{"table"}),
		OTLPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_otlp_requests_total",
			Help: "OTLP requests answered by the receivers, by protocol (http, grpc), signal and outcome (accepted, partial: some items dead-lettered, invalid, too_large, unauthenticated, forbidden, throttled, unavailable, error, not_served)."},
			[]string{"protocol", "signal", "outcome"}),
		OTLPItems: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracelake_otlp_items_total",
			Help: "Spans, log records or metric points accepted by the receivers (stored in Kafka, or loaded into their table with otlp.mode load), by signal."}, []string{"signal"}),
	}
	reg.MustRegister(m.ConsumedRecords, m.ConsumedBytes, m.Lag, m.Committed, m.Freshness, m.Batches,
		m.StagedFiles, m.StagedBytes, m.Loads, m.FilesPerLoad, m.LoadDuration, m.Retries, m.DLQRecords,
		m.InflightBytes, m.FetchPauses, m.LostRecords, m.LogResets, m.Rebalances,
		m.MergeRawRows, m.MergeChanged, m.MergeRejected, m.MergeFailures, m.MergeDuration, m.MergeLastSuccess,
		m.IcebergCommitDuration, m.IcebergCommitConflicts, m.IcebergSnapshots, m.IcebergMetadataBytes,
		m.OTLPRequests, m.OTLPItems)
	return m
}

// PartitionLabel renders a partition number as a label value.
func PartitionLabel(p int32) string { return strconv.Itoa(int(p)) }

// WatchGenAI exports the counters of the GenAI operations read while
// decoding spans: operations, operations without a price, and values of
// the wrong type by column.
func (m *Metrics) WatchGenAI(s *genai.Stats) {
	collectors := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracelake_genai_operations_total",
			Help: "GenAI operations read from spans (genai_operations rows written; a span decoded again after a restart counts again)."},
			func() float64 { return float64(s.Operations.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracelake_genai_unpriced_total",
			Help: "GenAI operations with tokens whose model has no price: their cost columns are null."},
			func() float64 { return float64(s.Unpriced.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracelake_genai_cost_out_of_range_total",
			Help: "GenAI operations whose token counts cost more than the cost columns hold (a bogus count): their cost columns are null."},
			func() float64 { return float64(s.CostOutOfRange.Load()) }),
	}
	for i, name := range genai.ColumnNames {
		collectors = append(collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracelake_genai_invalid_values_total",
			Help:        "Span attribute values of the wrong type for their genai_operations column (the column is null, the row kept).",
			ConstLabels: prometheus.Labels{"column": name}},
			func() float64 { return float64(s.Invalid[i].Load()) }))
	}
	for _, c := range collectors {
		m.Registry.MustRegister(c)
	}
}
