package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// Validate checks every key and returns one error per problem, joined, each
// naming the key and what is accepted. It makes no connection.
func (c *Config) Validate() error { return c.validate(true) }

// ValidateOffline is Validate for commands that never read from Kafka
// (sql, merge, reconcile, dlq): no topic is required.
func (c *Config) ValidateOffline() error { return c.validate(false) }

// checker is the check of validate and CheckFiles: a problem with key
// (unless the loading reported it as a typo already) is added to errs.
func (c *Config) checker(errs *[]error) func(ok bool, key, format string, args ...any) {
	return func(ok bool, key, format string, args ...any) {
		if slices.Contains(c.unread, key) {
			return // a typo the loading reported meant it
		}
		if !ok {
			*errs = append(*errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
		}
	}
}

// CheckFiles reads and parses the files the service reads when it starts
// (otlp.tokens_file; the otlp.tls and query.tls files; the kafka.tls files
// with enabled), one error per key at fault. It is not part of Validate:
// run and tracelake config call it (serve its query part,
// CheckQueryFiles), before anything is opened, while
// the commands that use none of these files (sql, dlq, report, …) keep
// working for an operator who cannot read the service's key; those that
// ask Kafka check its files (CheckKafkaFiles).
func (c *Config) CheckFiles() error {
	errs := []error{c.CheckKafkaFiles()}
	check := c.checker(&errs)
	c.OTLP.TLS.checkFiles("otlp.tls", check)
	errs = append(errs, c.CheckQueryFiles())
	return errors.Join(errs...)
}

// CheckQueryFiles reads and parses the files the query listeners read
// (query.tls; otlp.tokens_file, by which they tell their callers'
// tenants), the part of CheckFiles that tracelake serve, which runs no
// receiver and reads no Kafka, checks.
func (c *Config) CheckQueryFiles() error {
	var errs []error
	check := c.checker(&errs)
	c.Query.TLS.checkFiles("query.tls", check)
	if c.OTLP.TokensFile != "" {
		// The receivers read it again, and then every second (a file
		// that goes bad later keeps the tokens read before, see
		// tenancy.Tokens).
		err := tenancy.CheckTokensFile(c.OTLP.TokensFile)
		check(err == nil, "otlp.tokens_file", "%v", err)
	}
	return errors.Join(errs...)
}

// CheckKafkaFiles reads and parses the kafka.tls files (with enabled), the
// part of CheckFiles that the commands asking Kafka (verify; merge with
// change capture) check too, before they open anything: their client
// cannot be made without them, and verify without a client checks the
// sink's tables only.
func (c *Config) CheckKafkaFiles() error {
	var errs []error
	check := c.checker(&errs)
	if t := c.Kafka.TLS; t.Enabled && (t.CertFile == "") == (t.KeyFile == "") {
		_, file, err := t.clientTLS()
		check(err == nil, "kafka.tls."+file, "%v", err)
	}
	return errors.Join(errs...)
}

func (c *Config) validate(consuming bool) error {
	var errs []error
	check := c.checker(&errs)

	// Without topics, the brokers are needed only to forward to: a config
	// without a Kafka has its receivers load (OTLPMode), and forward
	// there would time out every request on a Kafka that is not there.
	switch {
	case c.Consumes():
		check(len(c.Kafka.Brokers) > 0, "kafka.brokers", "at least one host:port is required")
	case c.Forwards():
		check(len(c.Kafka.Brokers) > 0, "otlp.mode", "forward needs kafka.brokers (the Kafka it writes requests to); without a Kafka, use load (the default then)")
	}
	for _, b := range c.Kafka.Brokers {
		_, port, err := net.SplitHostPort(b)
		check(err == nil && port != "", "kafka.brokers", "want host:port, got %q", b)
	}
	switch {
	case len(c.Kafka.Topics) > 0 && c.Kafka.TopicRegex != "":
		errs = append(errs, errors.New("kafka.topic_regex: set either kafka.topics or kafka.topic_regex, not both"))
	case len(c.Kafka.Topics) == 0 && c.Kafka.TopicRegex == "" && consuming && !c.Receivers():
		errs = append(errs, errors.New("kafka.topics: at least one topic (or kafka.topic_regex) is required, unless the process only runs OTLP receivers (otlp.http, otlp.grpc)"))
	case c.Kafka.TopicRegex != "":
		_, err := regexp.Compile(c.Kafka.TopicRegex)
		check(err == nil, "kafka.topic_regex", "not a valid regular expression: %v", err)
	}
	for _, t := range c.Kafka.Topics {
		check(validTopic(t), "kafka.topics", "want topic names of A-Z, a-z, 0-9, '.', '_' and '-' (at most 249, not \".\" or \"..\"), got %q", t)
	}
	check(c.Kafka.Group != "", "kafka.group", "a consumer group name is required")
	check(slices.Contains([]string{"earliest", "latest"}, c.Kafka.StartOffset),
		"kafka.start_offset", "want earliest or latest, got %q", c.Kafka.StartOffset)
	check(c.Kafka.MetadataRefresh.D() >= time.Second && c.Kafka.MetadataRefresh.D() <= time.Hour,
		"kafka.metadata_refresh", "want 1s to 1h, got %s", c.Kafka.MetadataRefresh)
	check(c.Kafka.SessionTimeout.D() >= time.Second && c.Kafka.SessionTimeout.D() <= 30*time.Minute,
		"kafka.session_timeout", "want 1s to 30m, got %s", c.Kafka.SessionTimeout)
	check(c.Kafka.RebalanceTimeout.D() >= time.Second && c.Kafka.RebalanceTimeout.D() <= 30*time.Minute,
		"kafka.rebalance_timeout", "want 1s to 30m, got %s", c.Kafka.RebalanceTimeout)
	check(c.Kafka.CommitTimeout.D() >= 100*time.Millisecond && c.Kafka.CommitTimeout.D() <= 10*time.Minute,
		"kafka.commit_timeout", "want 100ms to 10m, got %s", c.Kafka.CommitTimeout)
	check(c.Kafka.FetchMaxBytes == 0 || c.Kafka.FetchMaxBytes >= 1<<20 && c.Kafka.FetchMaxBytes <= 1<<30,
		"kafka.fetch_max_bytes", "want 0 (derived from max_inflight_bytes) or 1MiB to 1GiB, got %s", c.Kafka.FetchMaxBytes)
	if m := c.Kafka.SASL.Mechanism; m != "" {
		check(slices.Contains([]string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, m), "kafka.sasl.mechanism",
			"want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (or empty for none), got %q", m)
		check(c.Kafka.SASL.User != "", "kafka.sasl.user", "a user is required with kafka.sasl.mechanism %s", m)
		// An empty password (left out, or from a variable that is empty)
		// never logs in (Kafka's PLAIN refuses it outright): the process
		// ran and never joined its group.
		check(c.Kafka.SASL.Password != "", "kafka.sasl.password",
			"a password is required with kafka.sasl.mechanism %s (it is empty: if it comes from %s, that variable is empty)", m, EnvName("kafka.sasl.password"))
	}
	check((c.Kafka.TLS.CertFile == "") == (c.Kafka.TLS.KeyFile == ""), "kafka.tls.cert_file",
		"set both cert_file and key_file, or neither")
	// The brokers are dialled over TLS only with enabled (kafka/security.go):
	// a CA or certificate given without it was ignored, and the client
	// (its SASL password too) spoke plain text without a word.
	if t := c.Kafka.TLS; !t.Enabled {
		for key, set := range map[string]bool{"ca_file": t.CAFile != "", "cert_file": t.CertFile != "", "key_file": t.KeyFile != "",
			"server_name": t.ServerName != "", "insecure_skip_verify": t.InsecureSkipVerify} {
			check(!set, "kafka.tls."+key, "set, but kafka.tls.enabled is false, so the brokers are reached in plain text: set enabled: true (or leave %s out)", key)
		}
	}

	check(c.Workers >= 1 && c.Workers <= 256, "workers", "want 1 to 256, got %d", c.Workers)
	check(c.Mode == ModeRaw || c.Mode == ModeTransform, "mode", "want raw or transform, got %q", c.Mode)
	check(slices.Contains([]string{FormatJSON, FormatOTLPProto, FormatOTLPJSON}, c.Kafka.Format) || c.CapturesChanges(), "kafka.format",
		"want json, otlp_proto, otlp_json, debezium, canal or maxwell, got %q", c.Kafka.Format)
	c.validateCDC(check)
	check(slices.Contains([]string{SignalTraces, SignalLogs, SignalMetrics}, c.Kafka.Signal), "kafka.signal",
		"want traces, logs or metrics, got %q", c.Kafka.Signal)
	if len(c.OTLP.Signals) > 0 {
		// Without a receiver, "applies to otlp.mode load" would be said to
		// a file that sets otlp.mode load: name what is missing.
		check(c.Receivers(), "otlp.signals", "the signals the receivers load, and no receiver is set (otlp.http or otlp.grpc)")
		check(!c.Receivers() || c.LoadsReceived(), "otlp.signals", "applies to otlp.mode load (in forward mode the receivers take every signal, each to its otlp.forward topic)")
		// One error for the list: a misspelt signal ([trace]) was one per
		// entry, and the list then also reported as lacking kafka.signal.
		valid := true
		for i, sig := range c.OTLP.Signals {
			valid = valid && slices.Contains([]string{SignalTraces, SignalLogs, SignalMetrics}, sig) && !slices.Contains(c.OTLP.Signals[:i], sig)
		}
		check(valid, "otlp.signals", "want traces, logs or metrics, each once, got %q", c.OTLP.Signals)
		check(!valid || slices.Contains(c.OTLP.Signals, c.Kafka.Signal), "otlp.signals",
			"must hold kafka.signal (%s), whose rows go to sink.table, got %q", c.Kafka.Signal, c.OTLP.Signals)
		for _, sig := range c.OTLP.Signals {
			check(sig == c.Kafka.Signal || !sqltext.SameTable(signalTable[sig], c.Sink.Table), "sink.table",
				"%s is where otlp.signals loads %s: name kafka.signal's (%s) table otherwise", c.Sink.Table, sig, c.Kafka.Signal)
		}
	}
	if c.LoadsReceived() && c.Consumes() && !c.CapturesChanges() {
		check(c.Kafka.Format != FormatJSON, "kafka.format",
			"otlp.mode load writes OpenTelemetry rows into sink.table, and the topics consumed beside it load into the same table: want otlp_proto or otlp_json (or otlp.mode forward)")
	}
	if c.DecodesOTLP() {
		check(c.Mode == ModeRaw, "mode", "transform mode maps JSON objects onto your table; with %s the rows are OpenTelemetry tables (accepted: raw)", c.otelSource())
		check(len(c.Merge.Models) == 0, "merge.models", "models read the raw table's JSON; with %s there is none", c.otelSource())
	}
	check(slices.Contains([]string{"auto", "on", "off"}, c.GenAI.Operations), "genai.operations",
		"want auto, on or off, got %q", c.GenAI.Operations)
	if c.GenAI.Operations == "on" {
		// The spans may be another signal's than kafka.signal's: a
		// load-mode run's traces among otlp.signals.
		check(c.GenAIConfig() != nil, "genai.operations",
			"operations are read from OpenTelemetry spans: want kafka.format otlp_proto or otlp_json with kafka.signal traces, or otlp.mode load with traces among otlp.signals (accepted here: auto or off)")
	}
	check(identifier.MatchString(c.GenAI.Table) && c.GenAI.Table != c.Sink.Table, "genai.table",
		"want a table name other than sink.table (letters, digits, _), got %q", c.GenAI.Table)
	if c.GenAI.Table != c.Sink.Table {
		c.validateGenAITable(check)
	}
	if err := tenancy.CheckTenant(c.Tenancy.Default); err != nil {
		check(false, "tenancy.default", "%v", err)
	}
	// Forwarded requests carry their tenant in this header, and the
	// consumers of the forward topics read it from there: under "" the
	// tenant checked (and authorised by token) was written under an empty
	// name and every row was stored as tenancy.default's. Load mode hands
	// the tenant over in its own header, and a consumer alone may read
	// none ("").
	check(!c.Forwards() || c.Tenancy.KafkaHeader != "", "tenancy.kafka_header",
		"otlp.mode forward writes each request's tenant in this header and its loaders read it from there: want a header name (default X-Scope-OrgID), got \"\"")
	// Forwarded messages name their signal in this header (the receivers'
	// forward writes it, otel.SignalHeader), and a loader reads a
	// message's signal from the first header of that name: a tenant
	// header of the same name came first and was read as the signal, and
	// every forwarded message was skipped as another signal's.
	readsOTLPHeaders := c.Forwards() || c.Consumes() && (c.Kafka.Format == FormatOTLPProto || c.Kafka.Format == FormatOTLPJSON)
	check(!readsOTLPHeaders || !strings.EqualFold(c.Tenancy.KafkaHeader, OTLPSignalHeader) && !strings.EqualFold(c.Tenancy.KafkaHeader, OTLPTopicSignalsHeader), "tenancy.kafka_header",
		"%q is a header of tracelake's forwarded messages (their signal, or their topic's): want another header name (default X-Scope-OrgID)", c.Tenancy.KafkaHeader)
	if c.Forwards() {
		// The receivers' messages are protobuf, and a loader skips those of
		// another signal (otel.AppendRows): the topics this process both
		// forwards to and consumes are read as they are written, or every
		// request acknowledged is a dead letter or skipped, with no error.
		forward := c.OTLP.Forward.ForwardTopics()
		consumed, key := c.Kafka.Topics, "kafka.topics"
		if re, err := regexp.Compile(c.Kafka.TopicRegex); c.Kafka.TopicRegex != "" && err == nil {
			// topic_regex consumes the forward topics it matches as surely
			// as a list naming them (kafka.Admin.Topics): a regex matching
			// otlp_spans loaded the receivers' protobuf as JSON, every
			// acknowledged request a dead letter.
			consumed, key = nil, "kafka.topic_regex"
			for _, sig := range []string{SignalTraces, SignalLogs, SignalMetrics} {
				if t := forward[sig]; re.MatchString(t) && !slices.Contains(consumed, t) {
					consumed = append(consumed, t)
				}
			}
		}
		for _, topic := range consumed {
			var sigs []string // the signals forwarded to topic
			for _, sig := range []string{SignalTraces, SignalLogs, SignalMetrics} {
				if forward[sig] == topic {
					sigs = append(sigs, sig)
				}
			}
			if len(sigs) == 0 {
				continue
			}
			check(c.Kafka.Format == FormatOTLPProto, key,
				"%s is where the receivers forward requests, as protobuf: want kafka.format otlp_proto to load them, got %q", topic, c.Kafka.Format)
			check(slices.Contains(sigs, c.Kafka.Signal), key,
				"%s is where the receivers forward %s requests, which a loader of kafka.signal %s skips: consume it with kafka.signal %s (a process per signal)",
				topic, strings.Join(sigs, ", "), c.Kafka.Signal, sigs[0])
		}
	}
	c.OTLP.validate(check)
	c.Query.validate(check)
	c.validateListeners(check)
	check(c.Query.FlightSQL == "" || c.Sink.Type != SinkDatabend, "query.flight_sql",
		"the read path serves the duckdb and iceberg sinks; Databend answers SQL itself (bendsql, its HTTP and MySQL handlers)")
	check(c.Query.HTTP == "" || c.Sink.Type != SinkDatabend, "query.http",
		"the read path serves the duckdb and iceberg sinks; with Databend, point Grafana at Databend itself")

	check(c.Batch.MaxRecords >= 1 && c.Batch.MaxRecords <= 10_000_000,
		"batch.max_records", "want 1 to 10000000, got %d", c.Batch.MaxRecords)
	check(c.Batch.MaxBytes >= 1<<10 && c.Batch.MaxBytes <= 4<<30,
		"batch.max_bytes", "want 1KiB to 4GiB, got %s", c.Batch.MaxBytes)
	check(c.Batch.MaxInterval.D() >= time.Millisecond && c.Batch.MaxInterval.D() <= 24*time.Hour,
		"batch.max_interval", "want 1ms to 24h, got %s", c.Batch.MaxInterval)

	check(c.Load.MaxFiles >= 1 && c.Load.MaxFiles <= 10_000,
		"load.max_files", "want 1 to 10000, got %d", c.Load.MaxFiles)
	check(c.Load.MaxBytes == 0 || c.Load.MaxBytes >= 1<<20,
		"load.max_bytes", "want 0 (a sixteenth of max_inflight_bytes) or at least 1MiB, got %s", c.Load.MaxBytes)
	check(c.Load.MaxInterval.D() >= 0 && c.Load.MaxInterval.D() <= 24*time.Hour,
		"load.max_interval", "want 0s to 24h, got %s", c.Load.MaxInterval)
	check(slices.Contains([]string{"auto", "none", "zstd"}, c.Load.Compression),
		"load.compression", "want auto, none or zstd, got %q", c.Load.Compression)

	check(c.Retry.MaxDelay.D() >= time.Second && c.Retry.MaxDelay.D() <= 24*time.Hour,
		"retry.max_delay", "want 1s to 24h, got %s", c.Retry.MaxDelay)

	// The section of a sink other than sink.type's is not read: a DSN or
	// catalog given without sink.type sent the rows to ./tracelake.duckdb
	// while the file seemed to name Databend or Iceberg, and a DuckDB path,
	// memory limit or thread count beside Databend or Iceberg applied to
	// nothing.
	def := Default().Sink
	for _, other := range []struct {
		typ          string
		section, def any
	}{{SinkDuckDB, c.Sink.DuckDB, def.DuckDB}, {SinkDatabend, c.Sink.Databend, def.Databend}, {SinkIceberg, c.Sink.Iceberg, def.Iceberg}} {
		typ := other.typ
		if c.Sink.Type == typ || !slices.Contains([]string{SinkDuckDB, SinkDatabend, SinkIceberg}, c.Sink.Type) {
			// A sink.type that names no sink is its own error (below):
			// the section of the sink it meant is not another sink's.
			continue
		}
		for _, key := range changedKeys("sink."+typ, reflect.ValueOf(other.section), reflect.ValueOf(other.def)) {
			check(false, key, "set, but sink.type is %s: the %s section is read only with sink.type %s (set it, or leave the section out)", c.Sink.Type, typ, typ)
		}
	}
	switch c.Sink.Type {
	case SinkDuckDB:
		check(c.Sink.DuckDB.Path != "", "sink.duckdb.path", "a database file path is required")
		check(c.Sink.DuckDB.MemoryLimit == 0 || c.Sink.DuckDB.MemoryLimit >= minDuckDBMemory, "sink.duckdb.memory_limit",
			"want 0 (max_inflight_bytes) or at least 128MiB, got %s", c.Sink.DuckDB.MemoryLimit)
		check(c.Sink.DuckDB.Threads >= 0 && c.Sink.DuckDB.Threads <= 1024, "sink.duckdb.threads",
			"want 0 (one per core, one fewer beside the pipeline, within memory_limit) to 1024, got %d", c.Sink.DuckDB.Threads)
		check(slices.Contains([]string{"auto", "zstd", "none"}, c.Sink.DuckDB.JSONCompression), "sink.duckdb.json_compression",
			"want auto, zstd or none, got %q", c.Sink.DuckDB.JSONCompression)
		check(c.Mode == ModeRaw || c.Sink.DuckDB.JSONCompression != "none", "sink.duckdb.json_compression",
			"applies to the raw table tracelake creates; in transform mode the table is yours (accepted: auto, or zstd, which changes nothing there)")
	case SinkDatabend:
		c.Sink.Databend.validate(check)
	case SinkIceberg:
		check(c.Sink.Iceberg.Catalog != "", "sink.iceberg.catalog", "a SQLite file, a postgres:// URL or a REST catalog's https:// URL is required")
		rest := strings.HasPrefix(c.Sink.Iceberg.Catalog, "http://") || strings.HasPrefix(c.Sink.Iceberg.Catalog, "https://")
		check(rest || c.Sink.Iceberg.REST == (IcebergREST{}), "sink.iceberg.rest",
			"set, but sink.iceberg.catalog is not a REST catalog (want an http:// or https:// URL there)")
		check(c.Sink.Iceberg.Warehouse != "", "sink.iceberg.warehouse", "a directory for the tables' files is required")
		check(c.Sink.Iceberg.CatalogName != "", "sink.iceberg.catalog_name", "a name is required (default tracelake)")
		// At most well below orphan cleanup's shortest grace period (1h):
		// staged data files wait for their commit that long.
		check(c.Sink.Iceberg.CommitInterval.D() >= 100*time.Millisecond && c.Sink.Iceberg.CommitInterval.D() <= 10*time.Minute,
			"sink.iceberg.commit_interval", "want 100ms to 10m, got %s", c.Sink.Iceberg.CommitInterval)
		m := c.Sink.Iceberg.Maintenance
		check(m.Every.D() == 0 || m.Every.D() >= time.Second, "sink.iceberg.maintenance.every", "want 0 (off) or at least 1s, got %s", m.Every)
		check(m.TargetFileSize >= 1<<20, "sink.iceberg.maintenance.target_file_size", "want at least 1MiB, got %s", m.TargetFileSize)
		check(m.SmallFiles >= 2, "sink.iceberg.maintenance.small_files", "want at least 2, got %d", m.SmallFiles)
		check(m.RetainLast >= 1, "sink.iceberg.maintenance.retain_last", "want at least 1, got %d", m.RetainLast)
		check(m.ExpireAfter.D() >= 0, "sink.iceberg.maintenance.expire_after", "want a duration of 0 or more, got %s", m.ExpireAfter)
		if pb := c.Sink.Iceberg.PartitionBy; pb != "" {
			_, err := gojson.CreatePath(pb)
			check(strings.HasPrefix(pb, "$.") && err == nil, "sink.iceberg.partition_by",
				"want a JSON path to one field of the value, such as $.start_time, or empty for the Kafka timestamp; got %q", pb)
		}
		// iceberg-go uses the pair only when both are set: one alone (a
		// secret from an empty variable) reached the warehouse with the
		// AWS SDK's own credentials, or failed at the first open.
		s3 := c.Sink.Iceberg.S3
		check((s3.AccessKeyID == "") == (s3.SecretAccessKey == ""), "sink.iceberg.s3.secret_access_key",
			"set both access_key_id and secret_access_key, or neither (for the AWS SDK's own credentials); one is empty")
		r := c.Sink.Iceberg.REST
		check(!(r.SigV4Region != "" || r.SigV4Service != "") || r.SigV4, "sink.iceberg.rest.sigv4_region",
			"set, but sink.iceberg.rest.sigv4 is false (want sigv4: true to sign requests)")
		check(r.OAuth2ServerURI == "" || strings.HasPrefix(r.OAuth2ServerURI, "http://") || strings.HasPrefix(r.OAuth2ServerURI, "https://"),
			"sink.iceberg.rest.oauth2_server_uri", "want an http:// or https:// URL, got %q", r.OAuth2ServerURI)
		check((r.Scope == "" && r.OAuth2ServerURI == "") || r.Credential != "", "sink.iceberg.rest.scope",
			"scope and oauth2_server_uri go with credential (client_id:client_secret), which is not set")
		check(identifier.MatchString(c.Sink.Iceberg.Namespace) && !strings.Contains(c.Sink.Iceberg.Namespace, "."),
			"sink.iceberg.namespace", "want a name of letters, digits and _, got %q", c.Sink.Iceberg.Namespace)
		check(!strings.Contains(c.Sink.Table, "."), "sink.table", "with iceberg, a table name without a schema (the namespace is sink.iceberg.namespace), got %q", c.Sink.Table)
		check(c.Mode == ModeRaw, "mode", "transform mode is not built for the iceberg sink; accepted with iceberg: raw")
		// Iceberg loads at its commit interval (LoadInterval): a
		// load.max_interval would be ignored without a word. The file's
		// keys are not kept, so only a value other than the default is
		// seen as set.
		check(c.Load.MaxInterval.D() == defaultLoadInterval, "load.max_interval",
			"not used with sink.type iceberg, which commits every sink.iceberg.commit_interval (%s): leave it out, and set sink.iceberg.commit_interval (100ms to 10m)",
			c.Sink.Iceberg.CommitInterval)
		// Models read the raw table with DuckDB's or Databend's SQL; only
		// the OpenTelemetry tables' dedup model is built for Iceberg (its
		// models are refused by the OpenTelemetry check above). One error
		// per key: models named, merge.every only when it is the key set.
		if !c.DecodesOTLP() {
			check(len(c.Merge.Models) == 0, "merge.models",
				"models are not built for the iceberg sink yet (accepted with iceberg: none; the OpenTelemetry tables' dedup model is built in)")
			check(c.Merge.Every.D() <= 0 || len(c.Merge.Models) > 0, "merge.every", // a negative one: its range (Merge.validate)
				"models are not built for the iceberg sink yet (the OpenTelemetry tables' dedup model is): want 0")
		}
	default:
		check(false, "sink.type", "want duckdb, databend or iceberg, got %q", c.Sink.Type)
	}
	check(identifier.MatchString(c.Sink.Table), "sink.table",
		"want a table name of letters, digits and _ (optionally schema.table), got %q", c.Sink.Table)
	check(c.MaxInflightBytes >= 1<<20, "max_inflight_bytes", "want at least 1MiB, got %s", c.MaxInflightBytes)
	check(c.ShutdownTimeout.D() >= time.Millisecond && c.ShutdownTimeout.D() <= time.Hour,
		"shutdown_timeout", "want 1ms to 1h, got %s", c.ShutdownTimeout)
	if c.Metrics.Listen != "" {
		_, _, err := net.SplitHostPort(c.Metrics.Listen)
		check(err == nil, "metrics.listen", "want host:port (or empty to turn it off), got %q", c.Metrics.Listen)
	}
	c.Merge.validate(check)
	// An OpenTelemetry table's model is built in (<table>_dedup).
	// (Iceberg's merge.every is checked with the sink above.)
	// A negative merge.every is reported once, by its range (Merge.validate).
	check(c.Merge.Every.D() <= 0 || len(c.Merge.Models) > 0 || c.DecodesOTLP() || c.CapturesChanges() || c.Sink.Type == SinkIceberg, "merge.every", "is set but merge.models is empty (it merges the models of merge.models, of an OpenTelemetry table, or of the changelog tables of kafka.format debezium, canal or maxwell)")
	for i, m := range c.Merge.Models {
		check(c.Mode == ModeRaw || m.Source != "", fmt.Sprintf("merge.models[%d].source", i),
			"a model reads a tracelake raw table; in transform mode sink.table is your own table, so name the raw table")
	}
	c.validateModelTables(check)
	return errors.Join(errs...)
}

// validateModelTables checks that the tables each model writes are its
// own: its target, <name>_rejects, with a version <target>_tombstones
// and on DuckDB <target>_deciding (internal/merge/plan.go) and on Databend <name>_increment (internal/
// merge/databend.go). A merge creates them if absent and `merge
// --rebuild` drops and recreates them, so a target naming a raw table's
// ledger or dead-letter table, or another model's target, was accepted
// here, failed its merges ("has other columns than the model: run
// tracelake merge --rebuild"), and that rebuild replaced the ledger (every
// load's position) or the other model's rows.
func (c *Config) validateModelTables(check func(ok bool, key, format string, args ...any)) {
	owner := map[string]string{} // table, as DuckDB resolves it -> what it is
	norm := func(t string) string { return strings.TrimPrefix(strings.ToLower(t), "main.") }
	claim := func(table, what string) {
		if _, taken := owner[norm(table)]; !taken {
			owner[norm(table)] = what
		}
	}
	claim(c.Sink.Table, "sink.table")
	claim(c.DLQTable(), "sink.table's dead-letter table")
	claim(c.LedgerTable(), "sink.table's ledger")
	if c.Sink.Type == SinkDatabend {
		// The claims of ledger positions (internal/sink/databend/claim.go).
		claim(c.Sink.Table+"_fence", "sink.table's fence")
	}
	models := c.Models()
	for _, m := range models {
		claim(m.Source, "a model's source table")
		claim(m.Source+"_dlq", m.Source+"'s dead-letter table")
		claim(m.Source+"_ledger", m.Source+"'s ledger")
	}
	named := map[string]bool{}
	for i, m := range models {
		if named[m.Name] {
			continue // a model defined twice is reported as such
		}
		named[m.Name] = true
		key := fmt.Sprintf("merge.models[%d].target", i)
		if c.Merge.Models[i].Target == "" {
			key = fmt.Sprintf("merge.models[%d].name", i) // the target's default
		}
		written := []string{m.Target, m.Name + "_rejects"}
		if m.Version != "" {
			written = append(written, m.Target+"_tombstones")
			if c.Sink.Type != SinkDatabend {
				// Each key's deciding change (merge.DecidingSuffix),
				// kept by DuckDB merges.
				written = append(written, m.Target+"_deciding")
			}
		}
		if c.Sink.Type == SinkDatabend {
			// The scratch table of a Databend merge, dropped and made
			// again when the model's target is absent.
			written = append(written, m.Name+"_increment")
		}
		for _, t := range written {
			what, taken := owner[norm(t)]
			reserved := strings.HasPrefix(norm(t), "tracelake_")
			check(!taken && !reserved, key,
				"model %s writes the table %s, which is %s: a merge writes into it and `merge --rebuild` drops it; name a table of the model's own",
				m.Name, t, cmp.Or(what, "reserved for tracelake's own tables (tracelake_*)"))
			if !taken {
				owner[norm(t)] = fmt.Sprintf("written by merge.models[%d] (%s)", i, m.Name)
			}
		}
	}
}

func (d *Databend) validate(check func(ok bool, key, format string, args ...any)) {
	check(d.DSN != "", "sink.databend.dsn", "a DSN is required, like databend://user:password@host:8000/default?sslmode=disable")
	if d.DSN != "" {
		u, err := url.Parse(d.DSN)
		check(err == nil && u.Host != "", "sink.databend.dsn", "want databend://user:password@host:port/database, got a DSN that does not parse (%s)", dsnProblem(d.DSN, err))
		// Refused here rather than when the sink opens: a session
		// setting that breaks the sink (idle_transaction_timeout_secs=0
		// fails every load) would otherwise surface as loads retried
		// for ever.
		for _, p := range databend.DSNProblems(d.DSN) {
			check(false, "sink.databend.dsn", "%s", p)
		}
	}
	check(d.Stage == "~" || identifier.MatchString(d.Stage), "sink.databend.stage", "want ~ (the user stage) or a stage name, got %q", d.Stage)
	check(d.Uploads >= 1 && d.Uploads <= 256, "sink.databend.uploads", "want 1 to 256, got %d", d.Uploads)
	check(d.Timeout.D() >= time.Second && d.Timeout.D() <= 24*time.Hour, "sink.databend.timeout", "want 1s to 24h, got %s", d.Timeout)
}

// dsnProblem says what is wrong with a DSN without repeating any of it (it
// holds a password). url.Parse's reasons quote the piece they stopped at,
// and that piece can be the password's: a '#', '/' or '?' in it ends the
// authority early (invalid port ":<its start>" after host), a '%' starts
// an escape (invalid URL escape "%<next two>"). The quoted pieces are
// dropped, and the usual cause named. A DSN with no '@' has no user or
// password, and no '#' no fragment, the one part after the host that
// url.Parse checks and quotes: the pieces (a bad port) are kept there.
func dsnProblem(dsn string, err error) string {
	if err == nil {
		return "no host"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if !strings.ContainsAny(dsn, "@#") {
			return ue.Err.Error()
		}
		reason := strings.Join(strings.Fields(quotedPiece.ReplaceAllString(ue.Err.Error(), "")), " ")
		return reason + "; in the user or password, percent-encode # / ? % @ and spaces"
	}
	return "malformed"
}

// quotedPiece is a quoted excerpt in url.Parse's reasons.
var quotedPiece = regexp.MustCompile(`"[^"]*"`)

// otelSource names what makes the rows OpenTelemetry, for errors.
func (c *Config) otelSource() string {
	if c.Kafka.Format == FormatJSON {
		return "otlp.mode load"
	}
	return "kafka.format " + c.Kafka.Format
}

func (q *Query) validate(check func(ok bool, key, format string, args ...any)) {
	for key, addr := range map[string]string{"query.flight_sql": q.FlightSQL, "query.http": q.HTTP} {
		if addr != "" {
			_, _, err := net.SplitHostPort(addr)
			check(err == nil, key, "want host:port, got %q", addr)
		}
	}
	q.TLS.validate("query.tls", check)
	check(q.MaxConcurrent >= 1 && q.MaxConcurrent <= 1024, "query.max_concurrent", "want 1 to 1024, got %d", q.MaxConcurrent)
	check(q.Refresh.D() >= 100*time.Millisecond, "query.refresh", "want 100ms or more, got %s", q.Refresh.D())
	check(q.Timeout.D() >= 0, "query.timeout", "want 0 (none) or more, got %s", q.Timeout.D())
	check(q.YieldToLoads.D() >= 0 && q.YieldToLoads.D() <= time.Minute, "query.yield_to_loads",
		"want 0 (off) to 1m, got %s", q.YieldToLoads.D())
}

func (o *OTLP) validate(check func(ok bool, key, format string, args ...any)) {
	for key, addr := range map[string]string{"otlp.http": o.HTTP, "otlp.grpc": o.GRPC} {
		if addr != "" {
			_, _, err := net.SplitHostPort(addr)
			check(err == nil, key, "want host:port (or empty for off), got %q", addr)
		}
	}
	// "" in a config not read from a file (Default): OTLPMode decides.
	check(o.Mode == "" || o.Mode == OTLPForwardMode || o.Mode == OTLPLoadMode, "otlp.mode", "want forward or load, got %q", o.Mode)
	check(o.Instance >= 0, "otlp.instance", "want 0 or more, got %d", o.Instance)
	check(o.MaxBodyBytes >= 1<<10 && o.MaxBodyBytes <= 256<<20, "otlp.max_body_bytes", "want 1KiB to 256MiB, got %s", o.MaxBodyBytes)
	check(o.MaxConcurrentRequests >= 0 && o.MaxConcurrentRequests <= 1_000_000, "otlp.max_concurrent_requests",
		"want 0 (no bound) to 1000000, got %d", o.MaxConcurrentRequests)
	check(o.ReadTimeout == 0 || (o.ReadTimeout >= Duration(time.Second) && o.ReadTimeout <= Duration(time.Hour)), "otlp.read_timeout",
		"want 0 (no bound) or 1s to 1h, got %s", o.ReadTimeout)
	for key, topic := range map[string]string{"otlp.forward.traces_topic": o.Forward.TracesTopic,
		"otlp.forward.logs_topic": o.Forward.LogsTopic, "otlp.forward.metrics_topic": o.Forward.MetricsTopic} {
		check(validTopic(topic), key, "want a topic name of A-Z, a-z, 0-9, '.', '_' and '-' (at most 249), got %q", topic)
	}
	check(o.Forward.Topic == "" || validTopic(o.Forward.Topic), "otlp.forward.topic",
		"want a topic name of A-Z, a-z, 0-9, '.', '_' and '-' (at most 249; or empty for one per signal), got %q", o.Forward.Topic)
	o.TLS.validate("otlp.tls", check)
}

// validate checks a server's TLS settings, under key.
func (t ReceiverTLS) validate(key string, check func(ok bool, key, format string, args ...any)) {
	check((t.CertFile == "") == (t.KeyFile == ""), key+".cert_file", "set both cert_file and key_file, or neither")
	check(t.ClientCAFile == "" || t.CertFile != "", key+".client_ca_file", "mutual TLS needs the server's own cert_file and key_file too")
}

// checkFiles reads a server's TLS files, under key (see CheckFiles):
// not first when the server starts, after the sink is opened. Half a
// pair is validate's to report.
func (t ReceiverTLS) checkFiles(key string, check func(ok bool, key, format string, args ...any)) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return
	}
	_, file, err := t.serverTLS()
	check(err == nil, key+"."+file, "%v", err)
}

// validTopic is Kafka's rule for topic names (kafka.common.internals.Topic):
// ASCII letters, digits, '.', '_' and '-', 1 to 249 of them, not "." or
// "..". Checked here so that a mistyped list ("[a" from a list split on
// commas) is reported at startup, not by the broker.
func validTopic(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// changedKeys are the keys under path whose value in v is not def's (an
// empty list or map counts as the default nil one), in field order.
func changedKeys(path string, v, def reflect.Value) []string {
	if v.Kind() == reflect.Struct && !reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		var out []string
		for i := range v.NumField() {
			if tag := strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
				out = append(out, changedKeys(join(path, tag), v.Field(i), def.Field(i))...)
			}
		}
		return out
	}
	if (v.Kind() == reflect.Map || v.Kind() == reflect.Slice) && v.Len() == 0 && def.Len() == 0 {
		return nil
	}
	if reflect.DeepEqual(v.Interface(), def.Interface()) {
		return nil
	}
	return []string{path}
}

// validateGenAITable checks that genai.table names none of the tables a
// load or merge of this config writes, as DuckDB resolves names (without
// regard to case, main. or not): the exact comparison above let
// OTEL_SPANS through, and the derived table's preparation then added its
// columns to otel_spans, loads put operations among the spans, and `merge
// --rebuild OTEL_SPANS` (which empties the derived table before filling
// it with operations) deleted every span.
func (c *Config) validateGenAITable(check func(ok bool, key, format string, args ...any)) {
	if c.GenAIConfig() == nil {
		return
	}
	for _, sc := range c.SignalConfigs() {
		t := sc.Sink.Table
		for _, table := range []string{t, t + "_dlq", t + "_ledger", t + "_dedup"} {
			check(!sqltext.SameTable(c.GenAI.Table, table), "genai.table",
				"%s is the table %s, which this configuration loads or merges (%s's): name a table of its own (default genai_operations)", c.GenAI.Table, table, sc.Kafka.Signal)
		}
	}
}

// validateListeners checks that no two listeners of a process share an
// address (a wildcard host takes its port on every address): accepted,
// the second failed to bind ("address already in use") once started.
// Port 0 is any free port, never a conflict.
func (c *Config) validateListeners(check func(ok bool, key, format string, args ...any)) {
	type listener struct{ key, addr, host, port string }
	var seen []listener
	for _, l := range []listener{{key: "metrics.listen", addr: c.Metrics.Listen}, {key: "otlp.http", addr: c.OTLP.HTTP},
		{key: "otlp.grpc", addr: c.OTLP.GRPC}, {key: "query.flight_sql", addr: c.Query.FlightSQL}, {key: "query.http", addr: c.Query.HTTP}} {
		host, port, err := net.SplitHostPort(l.addr)
		if l.addr == "" || err != nil || port == "0" {
			continue // off, malformed (reported as such) or any free port
		}
		l.host, l.port = host, port
		wildcard := func(h string) bool { return h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() }
		for _, o := range seen {
			if o.port == l.port && (o.host == l.host || wildcard(o.host) || wildcard(l.host)) {
				check(false, l.key, "%s is %s's address too (%s): give each listener its own port", l.addr, o.key, o.addr)
				break
			}
		}
		seen = append(seen, l)
	}
}
