package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGoodFile(t *testing.T) {
	cfg, err := FromFile("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 4 || cfg.Batch.MaxBytes != 16<<20 || cfg.Batch.MaxInterval.D() != 10*time.Second ||
		cfg.Load.Compression != "zstd" || len(cfg.Kafka.Brokers) != 2 || cfg.Retry.MaxDelay.D() != 30*time.Minute ||
		cfg.Sink.DuckDB.JSONCompression != "none" {
		t.Errorf("decoded wrong: %+v", cfg)
	}
}

// Each bad key is reported by its path with what is accepted.
func TestBadKeysNamed(t *testing.T) {
	f := func(file string, want ...string) {
		t.Helper()
		cfg, err := FromFile(file)
		err = errors.Join(err, cfg.Validate())
		if err == nil {
			t.Fatalf("%s: no error", file)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not contain %q:\n%v", file, w, err)
			}
		}
	}
	f("testdata/typo_key.yaml", "batch.max_recrods: unknown key (accepted: max_bytes, max_interval, max_records)")
	f("testdata/bad_values.yaml",
		`kafka.start_offset: want earliest or latest, got "middle"`,
		"kafka.commit_timeout: want 100ms to 10m, got 10ms",
		"workers: want 1 to 256, got 0",
		`mode: want raw or transform, got "fancy"`,
		"batch.max_bytes: want 1KiB to 4GiB, got 12B",
		`load.compression: want auto, none or zstd, got "lz5"`,
		`sink.type: want duckdb, databend or iceberg, got "postgres"`,
		"merge.every: is set but merge.models is empty")
	f("testdata/bad_models.yaml",
		"merge.models[0].colums: unknown key (accepted: action, columns, format, key, name, source, target, version)",
		`merge.models[0].key: "missing" is not one of the model's columns`,
		`merge.models[0].version: "nope" is not one of the model's columns`,
		"merge.models[1].columns: order_id.typo: unknown key (accepted: path, type)")
	f("testdata/bad_models.yaml",
		"merge.models[2].columns.id.type: want a SQL type like VARCHAR",
		`merge.models[2].columns.half.path: want a JSON path like`,
		// DuckDB reads the quoted key "*" as a wildcard (json_common.cpp
		// IsWildCard): every merge of the model failed on it.
		`merge.models[2].columns.star.path: the key "*" (in $.attrs."*") is a wildcard to DuckDB's JSON functions, which cannot address a field so named`,
		"merge.models[0].source: a model reads a tracelake raw table; in transform mode")
	f("testdata/bad_iceberg.yaml",
		"sink.iceberg.rest: set, but sink.iceberg.catalog is not a REST catalog",
		`sink.iceberg.namespace: want a name of letters, digits and _, got "a.b"`,
		"sink.iceberg.commit_interval: want 100ms to 10m, got 2h0m0s",
		"sink.iceberg.maintenance.every: want 0 (off) or at least 1s, got 10ms",
		"sink.iceberg.maintenance.small_files: want at least 2, got 1",
		`sink.iceberg.partition_by: want a JSON path to one field of the value, such as $.start_time, or empty for the Kafka timestamp; got "start_time"`,
		"mode: transform mode is not built for the iceberg sink")
	f("testdata/bad_iceberg_rest.yaml",
		"sink.iceberg.catalog_name: a name is required",
		"sink.iceberg.rest.sigv4_region: set, but sink.iceberg.rest.sigv4 is false",
		`sink.iceberg.rest.oauth2_server_uri: want an http:// or https:// URL, got "idp.example/token"`,
		"sink.iceberg.rest.scope: scope and oauth2_server_uri go with credential")
	f("testdata/bad_cdc.yaml",
		`cdc.log_table: changelog table name: template "log_{database}": must hold {table}`,
		`cdc.model_table: model table name: template "M_{table}": "M" is not lowercase a-z, 0-9 or _`,
		"cdc.shards[0]: shards[0].table: error parsing regexp",
		"cdc.distribute_every: must not be negative, got -5s (0: the default, 30s)",
		"cdc.unavailable_placeholder: is Debezium's placeholder, and kafka.format is canal",
		`cdc.heartbeats[1]: want database.table, or database.schema.table for PostgreSQL, got "heartbeat"`,
		"cdc.heartbeats[2]: topics: error parsing regexp: missing closing ): `db1\\.(`",
		`cdc.heartbeats[3]: want table (a source table whose changes are heartbeats) or topic (Debezium's heartbeat topic), one of them, got table "ops.heartbeat" and topic "__debezium-heartbeat.db1"`,
		"cdc.heartbeats[4]: topic: heartbeat messages are Debezium's, and kafka.format is canal (use a heartbeat table)",
		"cdc.heartbeats[5]: lag applies to a heartbeat topic: a heartbeat table's changes come through the source's log, got lag 1m0s",
		"kafka.format: canal routes changes to changelog tables, built for sink.type duckdb only for now, got sink.type databend",
		"merge.concurrency: want 1 to 64 merges at once (0: the default, 2), got 100")
	f("testdata/bad_debezium_placeholder.yaml",
		`cdc.unavailable_placeholder: unavailable value placeholder "hex:zz": want text, or hex: and hexadecimal octets (Debezium's unavailable.value.placeholder)`)
	f("testdata/bad_duckdb.yaml", `sink.duckdb.json_compression: want auto, zstd or none, got "lz4"`)
	f("testdata/transform_uncompressed.yaml", "sink.duckdb.json_compression: applies to the raw table tracelake creates")
	f("testdata/forward_no_tenant_header.yaml",
		`tenancy.kafka_header: otlp.mode forward writes each request's tenant in this header and its loaders read it from there: want a header name (default X-Scope-OrgID), got ""`)
	f("testdata/forward_no_brokers.yaml", "otlp.mode: forward needs kafka.brokers")
	f("testdata/reference_typo.json", "batchSise: unknown key of the reference config (accepted: ")
}

func TestModels(t *testing.T) {
	cfg, err := FromFile("testdata/models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := cfg.Model("customers")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range m.Columns {
		names = append(names, c.Name+" "+c.Type+" "+c.Path)
	}
	if got := strings.Join(names, ", "); got != "id BIGINT $.id, name VARCHAR $.name, version BIGINT $.meta.version, tags JSON $.tags, region VARCHAR $.attributes.\"cloud.region\"" {
		t.Errorf("columns out of order or wrong: %s", got)
	}
	if m.Target != "dim_customers" || m.Source != "trace_raw" || m.Format != FormatJSON || m.Action.Delete[0] != "delete" || cfg.Merge.Every.D() != 30*time.Second {
		t.Errorf("defaults wrong: %+v", m)
	}
	o, _ := cfg.Model("orders")
	if o.Target != "orders" || o.Format != FormatDebezium || o.Columns[1].Type != "DECIMAL(18, 2)" {
		t.Errorf("orders: %+v", o)
	}
	if _, err := cfg.Model("nope"); err == nil || !strings.Contains(err.Error(), "configured: customers, orders") {
		t.Errorf("unknown model: %v", err)
	}
}

func TestBadDurationNamesKey(t *testing.T) {
	_, err := FromFile("testdata/bad_values.yaml")
	if err == nil || !strings.Contains(err.Error(), "batch.max_interval: want a duration") {
		t.Fatalf("got %v", err)
	}
}

func TestReferenceConfigLoads(t *testing.T) {
	cfg, err := FromFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Kafka.Brokers, ",") != "localhost:9092,localhost:9093" || cfg.Kafka.Topics[0] != "ingest_test" ||
		cfg.Kafka.Group != "test" || cfg.Batch.MaxRecords != 5000 || cfg.Batch.MaxInterval.D() != 7*time.Second ||
		cfg.Workers != 3 || cfg.Load.MaxFiles != 64 || cfg.Load.MaxInterval.D() != 9*time.Second ||
		cfg.Retry.MaxDelay.D() != 10*time.Minute || cfg.Sink.Table != "default.kfk_test" || cfg.Sink.Type != SinkDatabend {
		t.Errorf("mapped wrong: %+v", cfg)
	}
	d := cfg.Sink.Databend
	if d.DSN != "https://user:secret@host:443" || d.Purge || !d.DisableVariantCheck || d.Stage != "~" ||
		cfg.DatabendPrefix() != "tracelake/default.kfk_test/" || !cfg.Zstd() {
		t.Errorf("Databend keys mapped wrong: %+v (prefix %s, zstd %v)", d, cfg.DatabendPrefix(), cfg.Zstd())
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the reference's file does not validate: %v", err)
	}
}

func TestDatabendKeysChecked(t *testing.T) {
	cfg := Default()
	cfg.Kafka.Topics = []string{"t"}
	cfg.Sink.Type = SinkDatabend
	cfg.Sink.Databend.Stage = "my stage"
	cfg.Sink.Databend.Uploads = 0
	err := cfg.Validate()
	for _, want := range []string{"sink.databend.dsn: a DSN is required", `sink.databend.stage: want ~ (the user stage) or a stage name, got "my stage"`,
		"sink.databend.uploads: want 1 to 256, got 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	cfg = Default()
	cfg.Kafka.Topics = []string{"t"}
	cfg.Sink.Type = SinkDatabend
	cfg.Sink.Databend.DSN = "databend://u:pa ss@[::1"
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "sink.databend.dsn: want databend://") || strings.Contains(err.Error(), "pa ss") {
		t.Errorf("bad DSN: %v", err)
	}
	if Default().Zstd() {
		t.Error("compression auto compresses for DuckDB")
	}
}

func TestReferenceUserStage(t *testing.T) {
	cfg := Default()
	if err := decodeReference(cfg, []byte(`{"databendDSN": "databend://u:p@h:8000", "userStage": "@ingest", "copyPurge": true, "useStreamingLoad": true}`)); err != nil {
		t.Fatal(err)
	}
	if cfg.Sink.Databend.Stage != "ingest" || !cfg.Sink.Databend.Purge || !cfg.Sink.Databend.StreamingLoad {
		t.Errorf("got %+v", cfg.Sink.Databend)
	}
}

// A stage named as Databend's SQL names it (@ingest, @~) is the stage:
// the reference config's userStage is read so, and a YAML config was
// refused with "want ~ (the user stage) or a stage name".
func TestYAMLStageWithItsAt(t *testing.T) {
	for give, want := range map[string]string{"'@ingest'": "ingest", "'@~'": "~", "ingest": "ingest"} {
		cfg, err := FromYAML([]byte("kafka: {topics: [t]}\nsink: {type: databend, databend: {dsn: 'databend://u:p@h:8000', stage: " + give + "}}"))
		if err != nil {
			t.Fatalf("stage %s: %v", give, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("stage %s: %v", give, err)
		}
		if cfg.Sink.Databend.Stage != want {
			t.Errorf("stage %s: read as %q, want %q", give, cfg.Sink.Databend.Stage, want)
		}
	}
	// "@" alone is no stage, refused in the words it was given.
	cfg, err := FromYAML([]byte("kafka: {topics: [t]}\nsink: {type: databend, databend: {dsn: 'databend://u:p@h:8000', stage: '@'}}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `got "@"`) {
		t.Errorf("stage @: %v, want refused quoting \"@\"", err)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := map[string]string{
		"TRACELAKE_KAFKA_BROKERS":     "a:1, b:2",
		"TRACELAKE_WORKERS":           "7",
		"TRACELAKE_BATCH_MAX_BYTES":   "32MiB",
		"TRACELAKE_LOAD_MAX_INTERVAL": "2s",
		"TRACELAKE_SINK_TABLE":        "t2",
	}
	cfg := Default()
	if err := applyEnv(cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Kafka.Brokers, ",") != "a:1,b:2" || cfg.Workers != 7 || cfg.Batch.MaxBytes != 32<<20 ||
		cfg.Load.MaxInterval.D() != 2*time.Second || cfg.Sink.Table != "t2" {
		t.Errorf("env not applied: %+v", cfg)
	}
	err := applyEnv(Default(), func(k string) (string, bool) {
		if k == "TRACELAKE_WORKERS" {
			return "many", true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "workers (from TRACELAKE_WORKERS)") {
		t.Errorf("bad env value not named: %v", err)
	}
}

// Secrets never leave a redacted config; the original is untouched.
func TestRedacted(t *testing.T) {
	cfg := Default()
	cfg.Kafka.SASL.Password = "hunter2"
	cfg.Sink.Databend.DSN = "https://cloudapp:s3cret@host:443/db?x=1"
	r := cfg.Redacted()
	if r.Kafka.SASL.Password != Redacted || r.Sink.Databend.DSN != "https://cloudapp:REDACTED@host:443/db?x=1" {
		t.Errorf("redacted: %q %q", r.Kafka.SASL.Password, r.Sink.Databend.DSN)
	}
	if cfg.Kafka.SASL.Password != "hunter2" {
		t.Error("Redacted changed the original")
	}
	cfg.Sink.Databend.DSN = "databend://user@host" // no password: nothing to hide but still a secret field
	if got := cfg.Redacted().Sink.Databend.DSN; got != Redacted {
		t.Errorf("DSN without password = %q", got)
	}
}

func TestTopicsOrRegex(t *testing.T) {
	f := func(topics []string, re, want string) {
		t.Helper()
		cfg := Default()
		cfg.Kafka.Brokers = []string{"k:9092"}
		cfg.Kafka.Topics, cfg.Kafka.TopicRegex = topics, re
		err := cfg.Validate()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("topics %v regex %q: %v, want %q", topics, re, err, want)
		}
	}
	f([]string{"a"}, "", "")
	f(nil, "^a", "")
	f([]string{"a"}, "^a", "set either kafka.topics or kafka.topic_regex")
	f(nil, "", "kafka.topics: at least one topic (or kafka.topic_regex)")
	f(nil, "([", "kafka.topic_regex: not a valid regular expression")
}

// Commands that never consume (sql, merge, reconcile, dlq) need no topic.
func TestValidateOffline(t *testing.T) {
	cfg := Default()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.topics: at least one topic") {
		t.Errorf("Validate without topics: %v", err)
	}
	if err := cfg.ValidateOffline(); err != nil {
		t.Errorf("ValidateOffline without topics: %v", err)
	}
}

// One setting sizes a process's memory: the Kafka fetch size, DuckDB's
// memory_limit and Go's heap limit follow max_inflight_bytes unless set.
func TestMemoryFollowsInflightBytes(t *testing.T) {
	for _, tc := range []struct {
		yaml                   string
		workers                int
		fetch, duckdb, goLimit ByteSize
	}{
		{"kafka: {topics: [t]}", 2, 4 << 20, 256 << 20, 640 << 20}, // the defaults
		{"kafka: {topics: [t]}\nmax_inflight_bytes: 1GiB", 1, 32 << 20, 1 << 30, 2<<30 + 128<<20},
		{"kafka: {topics: [t]}\nmax_inflight_bytes: 16GiB", 1, 50 << 20, 16 << 30, 32<<30 + 128<<20}, // fetch capped
		{"kafka: {topics: [t]}\nmax_inflight_bytes: 16MiB", 2, 1 << 20, 128 << 20, 160 << 20},        // floors
		{"kafka: {topics: [t], fetch_max_bytes: 3MiB}\nsink: {duckdb: {memory_limit: 2GiB}}", 2, 3 << 20, 2 << 30, 640 << 20},
	} {
		cfg, err := FromYAML([]byte(tc.yaml))
		if err == nil {
			cfg.Workers = tc.workers
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := [3]ByteSize{cfg.FetchBytes(), cfg.DuckDBMemoryLimit(), ByteSize(cfg.GoMemoryLimit())}; got != [3]ByteSize{tc.fetch, tc.duckdb, tc.goLimit} {
			t.Errorf("%q: fetch, duckdb, go = %v, want %v %v %v", tc.yaml, got, tc.fetch, tc.duckdb, tc.goLimit)
		}
	}
	for yaml, want := range map[string]ByteSize{
		"kafka: {topics: [t]}":                          16 << 20, // a sixteenth of the budget
		"kafka: {topics: [t]}\nload: {max_bytes: 5MiB}": 5 << 20,
		"kafka: {topics: [t]}\nsink: {type: iceberg}":   0, // commits take no memory for their size
	} {
		if cfg, err := FromYAML([]byte(yaml)); err != nil || cfg.LoadBytes() != want {
			t.Errorf("%q: load bytes %v (%v), want %v", yaml, cfg.LoadBytes(), err, want)
		}
	}
	cfg, _ := FromYAML([]byte("kafka: {topics: [t]}\nsink: {duckdb: {memory_limit: 64MiB}}"))
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "sink.duckdb.memory_limit: want 0 (max_inflight_bytes) or at least 128MiB") {
		t.Errorf("memory_limit 64MiB: %v", err)
	}
}

// kafka.format and kafka.signal choose the OpenTelemetry tables; what is
// not built says so by key.
func TestOTLPFormat(t *testing.T) {
	for signal, table := range map[string]string{"": "otel_spans", "traces": "otel_spans", "logs": "otel_logs", "metrics": "otel_metrics"} {
		yaml := "kafka: {topics: [otlp_spans], format: otlp_proto"
		if signal != "" {
			yaml += ", signal: " + signal
		}
		cfg, err := FromYAML([]byte(yaml + "}"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil || cfg.Sink.Table != table || !cfg.DecodesOTLP() {
			t.Errorf("signal %q: table %q, err %v; want %s", signal, cfg.Sink.Table, err, table)
		}
	}
	cfg, _ := FromYAML([]byte("kafka: {topics: [t], format: otlp_json}\nsink: {table: spans}"))
	if cfg.Sink.Table != "spans" {
		t.Errorf("an explicit table was replaced by %q", cfg.Sink.Table)
	}
	// merge.every merges the built-in dedup model on every sink.
	for _, snk := range []string{"{type: duckdb}", "{type: iceberg, iceberg: {catalog: c.db, warehouse: w}}", `{type: databend, databend: {dsn: "databend://u:p@h:8000/db"}}`} {
		cfg, err := FromYAML([]byte("kafka: {topics: [t], format: otlp_proto}\nmerge: {every: 1m}\nsink: " + snk))
		if err = errors.Join(err, cfg.Validate()); err != nil {
			t.Errorf("merge.every with OpenTelemetry into %s: %v", snk, err)
		}
	}
	cfg, _ = FromYAML([]byte("kafka: {topics: [t]}"))
	if cfg.Sink.Table != "trace_raw" || cfg.DecodesOTLP() {
		t.Errorf("JSON default: table %q, otlp %v", cfg.Sink.Table, cfg.DecodesOTLP())
	}
	for yaml, want := range map[string]string{
		"kafka: {topics: [t], format: protobuf}":                     `kafka.format: want json, otlp_proto, otlp_json, debezium, canal or maxwell, got "protobuf"`,
		"kafka: {topics: [t], format: otlp_proto, signal: profiles}": `kafka.signal: want traces, logs or metrics, got "profiles"`,
		"kafka: {topics: [t], format: otlp_proto}\nmode: transform":  "mode: transform mode maps JSON objects onto your table; with kafka.format otlp_proto",
		"kafka: {topics: [t]}\ntenancy: {default: ..}":               `tenancy.default: tenant id ".." is not allowed`,
	} {
		cfg, err := FromYAML([]byte(yaml))
		err = errors.Join(err, cfg.Validate())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", yaml, err, want)
		}
	}
}

// otlp.forward.topic takes every signal; without it each has its own.
func TestOTLPForwardTopics(t *testing.T) {
	cfg, err := FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\"}"))
	if err != nil || cfg.Validate() != nil {
		t.Fatal(err, cfg.Validate())
	}
	if got := cfg.OTLP.Forward.ForwardTopics(); got[SignalTraces] != "otlp_spans" || got[SignalLogs] != "otlp_logs" || got[SignalMetrics] != "otlp_metrics" {
		t.Errorf("defaults: %v", got)
	}
	cfg, _ = FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\", forward: {topic: otel}}"))
	if got := cfg.OTLP.Forward.ForwardTopics(); got[SignalTraces] != "otel" || got[SignalLogs] != "otel" || got[SignalMetrics] != "otel" {
		t.Errorf("one topic: %v", got)
	}
}

// tenancy.kafka_header "" (no tenant header) is refused only where the
// receivers forward: there the tenant they checked was written under an
// empty name and every row stored as the default tenant's. Loading the
// requests directly, or consuming topics, may read no header.
func TestForwardNeedsTenantHeader(t *testing.T) {
	for yaml, forwards := range map[string]bool{
		"otlp: {http: \"127.0.0.1:4318\"}\nkafka: {brokers: [\"k:9092\"]}":      true,
		"otlp: {http: \"127.0.0.1:4318\"}":                                      false,
		"otlp: {grpc: \"127.0.0.1:4317\", mode: forward}\nkafka: {topics: [t]}": true,
		"otlp: {http: \"127.0.0.1:4318\", mode: load}":                          false,
		"kafka: {topics: [t], format: otlp_proto}":                              false,
	} {
		cfg, err := FromYAML([]byte(yaml + "\ntenancy: {kafka_header: \"\"}"))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if refused := err != nil && strings.Contains(err.Error(), "tenancy.kafka_header: "); refused != forwards || !forwards && err != nil {
			t.Errorf("%s with kafka_header \"\": %v; want refused %v", yaml, err, forwards)
		}
	}
}

// Forwarded messages name their signal in the header otlp-signal, beside
// the tenant's header: with tenancy.kafka_header otlp-signal the record
// held two such headers, the tenant first, and its loader took the tenant
// for the signal (otel.signalOf reads the first), a signal other than its
// own, and skipped every message: each acknowledged request stored no
// row, and verify found nothing missing (the ledger covers a skipped
// message). A consumer of OTLP reading its tenant there read the signal
// header of a shared topic as a tenant. Refused at start.
func TestTenantHeaderIsNotTheSignalHeader(t *testing.T) {
	for _, yaml := range []string{
		"otlp: {http: \"127.0.0.1:4318\"}\nkafka: {brokers: [\"k:9092\"]}",
		"otlp: {http: \"127.0.0.1:4318\"}\nkafka: {topics: [otlp_spans], format: otlp_proto}",
		"kafka: {topics: [t], format: otlp_json}",
	} {
		for _, header := range []string{"otlp-signal", "OTLP-Signal", "otlp-topic-signals"} {
			cfg, err := FromYAML([]byte(yaml + "\ntenancy: {kafka_header: " + header + "}"))
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tenancy.kafka_header: ") {
				t.Errorf("%s with kafka_header %s: %v; want refused", yaml, header, err)
			}
		}
	}
	// Raw JSON rows have no signal header, and load mode hands the
	// tenant over in a header of its own.
	for _, yaml := range []string{"kafka: {topics: [t]}", "otlp: {http: \"127.0.0.1:4318\"}"} {
		cfg, err := FromYAML([]byte(yaml + "\ntenancy: {kafka_header: otlp-signal}"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s with kafka_header otlp-signal: %v", yaml, err)
		}
	}
}

// A process whose receivers forward to the topics it consumes loads what
// they forward only if it reads them as they are written: protobuf
// (otlp_proto), and, on a topic of one signal, that signal. Consuming
// otlp_logs, where its receivers forward logs, with kafka.signal traces
// skipped each message as another signal's (otel.AppendRows: no row, the
// ledger covering its offset): every log record acknowledged, none stored,
// and verify OK. With kafka.format json or otlp_json every forwarded
// message was a dead letter. Refused at start; a topic taking every signal
// (otlp.forward.topic) is read by one loader per signal.
func TestConsumingTheForwardTopicsAsTheyAreWritten(t *testing.T) {
	const otlp = "otlp: {http: \"127.0.0.1:4318\"}\n"
	for yaml, refused := range map[string]bool{
		otlp + "kafka: {topics: [otlp_spans], format: otlp_proto}":                                                            false,
		otlp + "kafka: {topics: [otlp_logs], format: otlp_proto, signal: logs}":                                               false,
		otlp + "kafka: {topics: [otlp_logs], format: otlp_proto}":                                                             true,
		otlp + "kafka: {topics: [otlp_spans, otlp_metrics], format: otlp_proto}":                                              true,
		otlp + "kafka: {topics: [otlp_spans], format: otlp_json}":                                                             true,
		otlp + "kafka: {topics: [otlp_spans]}":                                                                                true,
		otlp + "kafka: {topics: [other], format: otlp_json}":                                                                  false,
		otlp + "kafka: {topics: [other]}":                                                                                     false,
		"otlp: {http: \"127.0.0.1:4318\", forward: {topic: otel}}\nkafka: {topics: [otel], format: otlp_proto, signal: logs}": false,
		"otlp: {http: \"127.0.0.1:4318\", forward: {topic: otel}}\nkafka: {topics: [otel], format: otlp_json}":                true,
		"kafka: {topics: [otlp_logs], format: otlp_proto}":                                                                    false, // no receivers
	} {
		cfg, err := FromYAML([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if got := err != nil && strings.Contains(err.Error(), "kafka.topics: "); got != refused || !refused && err != nil {
			t.Errorf("%s: %v; want refused %v", yaml, err, refused)
		}
	}
}

// otlp.signals: load mode only, known signals once each, holding
// kafka.signal, and no other signal's table named sink.table.
func TestOTLPSignalsChecked(t *testing.T) {
	for yaml, key := range map[string]string{
		"otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs, metrics]}":                             "",
		"otlp: {http: \"127.0.0.1:4318\", signals: [logs]}\nkafka: {signal: logs}":                       "",
		"otlp: {http: \"127.0.0.1:4318\", signals: [traces, spans]}":                                     "otlp.signals",
		"otlp: {http: \"127.0.0.1:4318\", signals: [traces, traces]}":                                    "otlp.signals",
		"otlp: {http: \"127.0.0.1:4318\", signals: [logs, metrics]}":                                     "otlp.signals",
		"otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs]}\nsink: {table: otel_logs}":            "sink.table",
		"otlp: {http: \"127.0.0.1:4318\", mode: forward, signals: [traces]}\nkafka: {brokers: [k:9092]}": "otlp.signals",
	} {
		cfg, err := FromYAML([]byte(yaml))
		if err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		err = cfg.ValidateOffline()
		if key == "" && err != nil || key != "" && (err == nil || !strings.Contains(err.Error(), key+":")) {
			t.Errorf("%s: %v, want an error naming %q", yaml, err, key)
		}
	}
	cfg, err := FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs, metrics]}\nsink: {duckdb: {path: a.duckdb}}"))
	if err != nil {
		t.Fatal(err)
	}
	logs := cfg.ForSignal(SignalLogs)
	if logs.Sink.Table != "otel_logs" || logs.Kafka.Signal != SignalLogs || logs.StageDir() == cfg.StageDir() || cfg.ForSignal(SignalTraces) != cfg {
		t.Errorf("ForSignal(logs) loads %s (signal %s, stage %s beside %s)", logs.Sink.Table, logs.Kafka.Signal, logs.StageDir(), cfg.StageDir())
	}
}

// genai.operations: on makes genai_operations of the spans alone: the
// other signals' configurations of a load-mode run (ForSignal) load no
// derived table.
func TestGenAIOperationsOnOnlyForSpans(t *testing.T) {
	cfg, err := FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs, metrics]}\ngenai: {operations: \"on\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateOffline(); err != nil {
		t.Fatal(err)
	}
	for sig, want := range map[string]bool{SignalTraces: true, SignalLogs: false, SignalMetrics: false} {
		if got := cfg.ForSignal(sig).GenAIOperations(); got != want {
			t.Errorf("genai.operations on: the %s table's configuration loads genai_operations: %v, want %v", sig, got, want)
		}
	}
}

// genai.operations: on asks for the spans' operations, which a load-mode
// run takes among otlp.signals whatever kafka.signal is: with kafka.signal
// logs it is accepted, and GenAIConfig is the traces table's
// configuration. Without traces among the signals it is refused.
func TestGenAIOperationsOnWithSpansAmongSignals(t *testing.T) {
	cfg, err := FromYAML([]byte("kafka: {signal: logs}\notlp: {http: \"127.0.0.1:4318\", signals: [traces, logs, metrics]}\ngenai: {operations: \"on\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateOffline(); err != nil {
		t.Fatalf("genai.operations on with traces among otlp.signals: %v", err)
	}
	if g := cfg.GenAIConfig(); g == nil || g.Kafka.Signal != SignalTraces || g.Sink.Table != "otel_spans" {
		t.Errorf("GenAIConfig of kafka.signal logs with traces among otlp.signals: %+v, want the otel_spans configuration", g)
	}
	cfg, err = FromYAML([]byte("kafka: {signal: logs}\notlp: {http: \"127.0.0.1:4318\", signals: [logs, metrics]}\ngenai: {operations: \"on\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateOffline(); err == nil || !strings.Contains(err.Error(), "genai.operations") {
		t.Errorf("genai.operations on without traces among otlp.signals: %v, want it refused", err)
	}
	if g := cfg.GenAIConfig(); g != nil {
		t.Errorf("GenAIConfig without spans: the %s configuration", g.Sink.Table)
	}
}

// The query section's bad values are named by key; its defaults pass.
func TestQueryChecked(t *testing.T) {
	for yaml, key := range map[string]string{
		"query: {flight_sql: \"8815\"}":                               "query.flight_sql",
		"query: {max_concurrent: 0}":                                  "query.max_concurrent",
		"query: {refresh: 1ms}":                                       "query.refresh",
		"query: {timeout: -1s}":                                       "query.timeout",
		"query: {yield_to_loads: -1s}":                                "query.yield_to_loads",
		"query: {yield_to_loads: 2m}":                                 "query.yield_to_loads",
		"query: {yield_to_loads: 0s}":                                 "",
		"query: {tls: {cert_file: c.pem}}":                            "query.tls.cert_file",
		"query: {tls: {client_ca_file: ca.pem}}":                      "query.tls.client_ca_file",
		"query: {flight_sql: \"127.0.0.1:8815\", shared_tables: [p]}": "",
		"query: {flight_sql: \"127.0.0.1:8815\"}\nsink: {type: databend, databend: {dsn: \"databend://u:p@h:8000/db\"}}": "query.flight_sql",
		"query: {http: \"3200\"}":           "query.http",
		"query: {http: \"127.0.0.1:3200\"}": "",
		"query: {http: \"127.0.0.1:3200\"}\nsink: {type: databend, databend: {dsn: \"databend://u:p@h:8000/db\"}}": "query.http",
	} {
		cfg, err := FromYAML([]byte(yaml))
		if err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		err = cfg.ValidateOffline()
		if key == "" && err != nil || key != "" && (err == nil || !strings.Contains(err.Error(), key+":")) {
			t.Errorf("%s: %v, want an error naming %q", yaml, err, key)
		}
	}
}

// Receivers in a config that names no Kafka load what they take: they
// forwarded by default, to a 127.0.0.1:9092 that was not there, and every
// request timed out. A Kafka named by file, environment or flag makes
// forward the default; an explicit otlp.mode is kept.
func TestOTLPModeFollowsKafka(t *testing.T) {
	const http = "otlp: {http: \"127.0.0.1:4318\"}\n"
	f := func(yaml, env string, flags func(*Config), mode string, brokers ...string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("TRACELAKE_KAFKA_BROKERS", env) // restored after the test
		if env == "" {
			os.Unsetenv("TRACELAKE_KAFKA_BROKERS")
		}
		var overrides []func(*Config)
		if flags != nil {
			overrides = append(overrides, flags)
		}
		cfg, err := FromFile(path, overrides...)
		if err = errors.Join(err, cfg.Validate()); err != nil {
			t.Fatalf("%q: %v", yaml, err)
		}
		if cfg.OTLP.Mode != mode || cfg.LoadsReceived() != (mode == OTLPLoadMode) || !slices.Equal(cfg.Kafka.Brokers, brokers) {
			t.Errorf("%q (env %q): mode %s, brokers %v; want %s, %v", yaml, env, cfg.OTLP.Mode, cfg.Kafka.Brokers, mode, brokers)
		}
	}
	f(http, "", nil, OTLPLoadMode)
	f(http+"kafka: {signal: logs}", "", nil, OTLPLoadMode) // kafka.signal picks what load mode loads
	f(http+"kafka: {brokers: [\"k:9092\"]}", "", nil, OTLPForwardMode, "k:9092")
	f(http, "k:9092", nil, OTLPForwardMode, "k:9092")
	f(http, "", func(c *Config) { c.Kafka.Brokers = []string{"f:9092"} }, OTLPForwardMode, "f:9092")
	f(http+"kafka: {topics: [t], format: otlp_proto}", "", nil, OTLPForwardMode, DefaultBroker)
	f(http+"kafka: {topic_regex: \"^t\", format: otlp_proto}", "", nil, OTLPForwardMode, DefaultBroker)
	f(http, "", func(c *Config) { c.Kafka.Topics = []string{"t"}; c.Kafka.Format = FormatOTLPProto }, OTLPForwardMode, DefaultBroker)
	f("otlp: {http: \"127.0.0.1:4318\", mode: load}\nkafka: {brokers: [\"k:9092\"]}", "", nil, OTLPLoadMode, "k:9092")
	f("otlp: {http: \"127.0.0.1:4318\", mode: forward}\nkafka: {topics: [t]}", "", nil, OTLPForwardMode, DefaultBroker)
	// In load mode the table is the signal's, as with an OTLP format.
	if cfg, _ := FromYAML([]byte(http)); cfg.Sink.Table != "otel_spans" {
		t.Errorf("load by default: table %s, want otel_spans", cfg.Sink.Table)
	}
}

// otlp.mode forward without a Kafka is refused in one line naming the key.
func TestForwardNeedsBrokers(t *testing.T) {
	cfg, err := FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\", mode: forward}"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "otlp.mode: forward needs kafka.brokers") {
		t.Errorf("forward without brokers: %v, want one line on otlp.mode", err)
	}
}

// TestOTLPSignalsTableCollisionAnyCase: DuckDB names tables without
// regard to case, and a table without a schema is main's, so sink.table
// OTEL_LOGS or main.otel_logs is otel_logs, where otlp.signals loads the
// logs: kafka.signal's rows would go into the logs table (and the two
// sinks share a ledger). Refused like sink.table otel_logs.
func TestOTLPSignalsTableCollisionAnyCase(t *testing.T) {
	for _, table := range []string{"OTEL_LOGS", "main.otel_logs", "Main.Otel_Logs"} {
		cfg, err := FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs]}\nsink: {table: " + table + "}"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.ValidateOffline(); err == nil || !strings.Contains(err.Error(), "sink.table:") {
			t.Errorf("sink.table %s with otlp.signals [traces, logs]: %v, want refused", table, err)
		}
	}
	cfg, err := FromYAML([]byte("otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs]}\nsink: {table: other.otel_logs}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateOffline(); err != nil {
		t.Errorf("sink.table other.otel_logs (another schema): %v", err)
	}
}

// An explicit empty action list would be merged as `x IN ()`, a syntax
// error on DuckDB and Databend that fails every merge; it is refused by
// key, where leaving the key out gives its default value.
func TestModelActionEmptyListRefused(t *testing.T) {
	const model = "kafka: {brokers: [\"k:9092\"], topics: [cdc]}\nmerge: {models: [{name: m, key: [id], columns: {id: {path: $.id, type: BIGINT}}, action: %s}]}"
	for action, want := range map[string]string{
		"{path: $.op, insert: []}":               "merge.models[0].action.insert: want at least one value of the action field (leave the key out for the default, [insert])",
		"{path: $.op, delete: []}":               "merge.models[0].action.delete: want at least one value of the action field (leave the key out for the default, [delete])",
		"{path: $.op}":                           "",
		"{path: $.op, delete: [d], insert: [i]}": "",
	} {
		cfg, err := FromYAML([]byte(fmt.Sprintf(model, action)))
		err = errors.Join(err, cfg.Validate())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("action %s: %v, want %q", action, err, want)
		}
	}
}

// load.max_interval is not used by the Iceberg sink, which commits every
// sink.iceberg.commit_interval: set there, it is refused by key rather
// than silently ignored; left at its default it is no error.
func TestIcebergRefusesLoadMaxInterval(t *testing.T) {
	const iceberg = "kafka: {topics: [t]}\nsink: {type: iceberg, iceberg: {catalog: c.db, warehouse: w}}\n"
	for yaml, want := range map[string]string{
		iceberg:                                             "",
		iceberg + "load: {max_files: 4}":                    "",
		iceberg + "load: {max_interval: 200ms}":             "load.max_interval: not used with sink.type iceberg, which commits every sink.iceberg.commit_interval (1m0s): leave it out, and set sink.iceberg.commit_interval (100ms to 10m)",
		"kafka: {topics: [t]}\nload: {max_interval: 200ms}": "",
	} {
		cfg, err := FromYAML([]byte(yaml))
		err = errors.Join(err, cfg.Validate())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s:\n got %v\nwant %q", yaml, err, want)
		}
	}
}

// A misspelled override in a section's namespace is an error naming it and
// what the section takes; variables outside every section are not ours.
func TestUnknownEnvVariableIsNamed(t *testing.T) {
	t.Setenv("TRACELAKE_KAFKA_BROKER", "a:1")            // kafka.brokers misspelled
	t.Setenv("TRACELAKE_SINK_DUCKDB_MEMORY_LIMT", "1GB") // sink.duckdb.memory_limit misspelled
	t.Setenv("TRACELAKE_CPU_PROFILE", "/tmp/p")          // no section: not a setting, passes
	t.Setenv("TRACELAKE_KAFKA_GROUP", "g")               // a key: applied
	cfg, err := FromFile("")
	if err == nil {
		t.Fatal("misspelled variables were accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"TRACELAKE_KAFKA_BROKER: no setting has this name (accepted: ", "TRACELAKE_KAFKA_BROKERS",
		"TRACELAKE_KAFKA_SASL_*", "TRACELAKE_SINK_DUCKDB_MEMORY_LIMT: no setting has this name", "TRACELAKE_SINK_DUCKDB_MEMORY_LIMIT",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "TRACELAKE_CPU_PROFILE") || strings.Contains(msg, "TRACELAKE_KAFKA_GROUP:") {
		t.Errorf("a variable that is not a misspelled setting was refused:\n%s", msg)
	}
	if strings.Contains(msg, "TRACELAKE_SINK_DUCKDB_MEMORY_LIMT: no setting has this name (accepted: TRACELAKE_KAFKA") {
		t.Errorf("accepted list is not the innermost section's:\n%s", msg)
	}
	if cfg == nil || cfg.Kafka.Group != "g" {
		t.Errorf("the known variable was not applied: %+v", cfg)
	}
}

// A model column given twice is an error naming it, at load: it was kept
// twice and the target's CREATE TABLE failed at every merge ("Column with
// name cost already exists").
func TestModelColumnGivenTwiceIsAnError(t *testing.T) {
	const y = "kafka: {topics: [t]}\nmerge:\n  models:\n    - name: m\n      key: [id]\n      columns:\n" +
		"        id: {path: $.id, type: VARCHAR}\n        cost: {path: $.cost, type: DOUBLE}\n        cost: {path: $.usage.cost, type: BIGINT}\n"
	cfg, err := FromYAML([]byte(y))
	err = errors.Join(err, cfg.Validate())
	if err == nil || !strings.Contains(err.Error(), "merge.models[0].columns: cost: defined twice (lines 8, 9)") {
		t.Errorf("column cost given twice: got %v (columns %v); want an error naming it and its lines", err, cfg.Merge.Models[0].Columns)
	}
}

// A typo inside one column is one error naming it: the model is not also
// said to have no columns, nor its key to be none of them. A column's
// spec may be an alias of an anchored mapping, as a section may.
func TestModelColumnTypoIsOneError(t *testing.T) {
	const y = "kafka: {topics: [t]}\nmerge: {models: [{name: m, key: [id], columns: {id: &c {path: $.id, type: VARCHAR}, name: {path: $.name, tpye: VARCHAR}, again: *c}}]}\n"
	cfg, err := FromYAML([]byte(y))
	err = errors.Join(err, cfg.Validate())
	if err == nil || !strings.Contains(err.Error(), "merge.models[0].columns: name.tpye: unknown key (accepted: path, type)") {
		t.Fatalf("got %v; want name.tpye named", err)
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		if !strings.Contains(l, "name.tpye") && !strings.Contains(l, "columns.name.type") {
			t.Errorf("an error that follows from nothing the file says: %s", l)
		}
	}
	if c, ok := cfg.Merge.Models[0].Columns.Lookup("again"); !ok || c.Path != "$.id" || c.Type != "VARCHAR" {
		t.Errorf("column given as an alias: %+v, want {path: $.id, type: VARCHAR}", c)
	}
}

// A model writes its target (and <name>_rejects, <target>_tombstones,
// on DuckDB <target>_deciding):
// one naming a table tracelake keeps, or another model's, is refused by
// key. Accepted, its merges failed with "has other columns than the model:
// run tracelake merge --rebuild", and that rebuild dropped the ledger (the
// positions of every load) or the other model's rows.
func TestModelTargetMustBeItsOwnTable(t *testing.T) {
	const model = "{name: %s, %skey: [id], columns: {id: {path: $.id, type: VARCHAR}}}"
	m := func(name, target string) string {
		if target != "" {
			target = "target: " + target + ", "
		}
		return fmt.Sprintf(model, name, target)
	}
	for models, want := range map[string]string{
		m("c", "trace_raw_ledger"):                 "merge.models[0].target: model c writes the table trace_raw_ledger, which is sink.table's ledger",
		m("c", "Main.Trace_Raw_DLQ"):               "merge.models[0].target: model c writes the table Main.Trace_Raw_DLQ, which is sink.table's dead-letter table",
		m("trace_raw", ""):                         "merge.models[0].name: model trace_raw writes the table trace_raw, which is sink.table",
		m("a", "shared") + ", " + m("b", "shared"): "merge.models[1].target: model b writes the table shared, which is written by merge.models[0] (a)",
		m("a", "") + ", " + m("b", "a_rejects"):    "merge.models[1].target: model b writes the table a_rejects, which is written by merge.models[0] (a)",
		m("w", "tracelake_merge_watermarks"):       "merge.models[0].target: model w writes the table tracelake_merge_watermarks, which is reserved",
		m("a", "dim_a") + ", " + m("b", "dim_b"):   "",
		"{name: a, key: [id], version: v, columns: {id: {path: $.id, type: VARCHAR}, v: {path: $.v, type: BIGINT}}}, " + m("b", "a_deciding"): "merge.models[1].target: model b writes the table a_deciding, which is written by merge.models[0] (a)",
	} {
		cfg, err := FromYAML([]byte("kafka: {topics: [t]}\nmerge: {models: [" + models + "]}\n"))
		err = errors.Join(err, cfg.Validate())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("models %s:\n got %v\nwant %q", models, err, want)
		}
	}
}

// otlp.signals without a receiver says that no receiver is set: "applies
// to otlp.mode load" was said to a file setting otlp.mode load, leaving
// the operator nothing to change.
func TestOTLPSignalsWithoutReceiverNamesTheMissingReceiver(t *testing.T) {
	cfg, err := FromYAML([]byte("otlp: {mode: load, signals: [traces, logs]}\n"))
	err = errors.Join(err, cfg.ValidateOffline())
	if err == nil || !strings.Contains(err.Error(), "otlp.signals: the signals the receivers load, and no receiver is set (otlp.http or otlp.grpc)") ||
		strings.Contains(err.Error(), "applies to otlp.mode load") {
		t.Errorf("otlp.mode load with signals and no receiver: got %v; want the missing receiver named, and only that", err)
	}
}

// tracelake's own config written as JSON (JSON is YAML) loads as such
// when it sets workers, a key the reference's file has too: it was read
// as the reference's file and its sections refused as "unknown key of the
// reference config". A reference file with workers is still one.
func TestOwnConfigAsJSONWithWorkersIsNotTheReference(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "tracelake.json")
	if err := os.WriteFile(own, []byte(`{"kafka": {"topics": ["t"]}, "workers": 1, "sink": {"table": "spans"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := FromFile(own)
	if cfg != nil {
		err = errors.Join(err, cfg.Validate())
	}
	if err != nil || cfg.Workers != 1 || cfg.Sink.Table != "spans" {
		t.Errorf("tracelake's own JSON config with workers: %v (workers %d, table %q)", err, cfg.Workers, cfg.Sink.Table)
	}
	ref := filepath.Join(dir, "config.json")
	if err := os.WriteFile(ref, []byte(`{"kafkaTopic": "t", "workers": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := FromFile(ref); err != nil || cfg.Workers != 3 || len(cfg.Kafka.Topics) != 1 {
		t.Errorf("the reference's file with workers: %v (%+v)", err, cfg)
	}
}

// A Kafka TLS setting given without kafka.tls.enabled is refused by key:
// the brokers were dialled in plain text (the SASL password with them)
// and the CA or certificate ignored without a word.
func TestKafkaTLSSettingWithoutEnabledIsAnError(t *testing.T) {
	for _, tls := range []string{"{ca_file: /etc/kafka/ca.pem}", "{cert_file: c.pem, key_file: k.pem}", "{server_name: kafka.internal}", "{insecure_skip_verify: true}"} {
		cfg, err := FromYAML([]byte("kafka: {topics: [t], tls: " + tls + "}\n"))
		err = errors.Join(err, cfg.Validate())
		if err == nil || !strings.Contains(err.Error(), "but kafka.tls.enabled is false") {
			t.Errorf("kafka.tls %s without enabled: got %v; want it refused", tls, err)
		}
	}
	// (Its files must be there too now: enabled with a server name alone.)
	cfg, err := FromYAML([]byte("kafka: {topics: [t], tls: {enabled: true, server_name: kafka.internal}}\n"))
	if err = errors.Join(err, cfg.Validate()); err != nil {
		t.Errorf("kafka.tls enabled with a server name: %v", err)
	}
}

// The section of a sink other than sink.type's is refused key by key when
// set: a Databend DSN or an Iceberg catalog given without sink.type sent
// the rows to ./tracelake.duckdb while the file seemed to name Databend or
// Iceberg. The sections written out at their defaults (as README's
// reference does) pass.
func TestOtherSinksSectionSetIsAnError(t *testing.T) {
	for yaml, want := range map[string]string{
		"sink: {databend: {dsn: \"databend://u:p@h:8000/db\"}}":                                                      "sink.databend.dsn: set, but sink.type is duckdb",
		"sink: {iceberg: {catalog: \"postgres://u@h/cat\", warehouse: s3://b/w}}":                                    "sink.iceberg.catalog: set, but sink.type is duckdb",
		"sink: {type: iceberg, databend: {uploads: 2}}":                                                              "sink.databend.uploads: set, but sink.type is iceberg",
		"sink: {type: databend, databend: {dsn: \"databend://u:p@h:8000/db\"}, iceberg: {table_properties: {a: b}}}": "sink.iceberg.table_properties: set, but sink.type is databend",
		"sink: {databend: {stage: \"~\", purge: true}, iceberg: {table_properties: {}, s3: {}, rest: {}}}":           "",
	} {
		cfg, err := FromYAML([]byte("kafka: {topics: [t]}\n" + yaml))
		err = errors.Join(err, cfg.Validate())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s:\n got %v\nwant %q", yaml, err, want)
		}
	}
}

// kafka.topic_regex consumes the receivers' forward topics it matches as a
// list naming them does, and is checked the same way: a regex matching
// otlp_spans with kafka.format json loaded the forwarded protobuf as JSON,
// every acknowledged request a dead letter, and was accepted.
func TestTopicRegexConsumingTheForwardTopicsIsChecked(t *testing.T) {
	const otlp = "otlp: {http: \"127.0.0.1:4318\"}\n"
	for yaml, want := range map[string]string{
		otlp + "kafka: {topic_regex: \"^otlp_spans$\"}":                                           "kafka.topic_regex: otlp_spans is where the receivers forward requests, as protobuf: want kafka.format otlp_proto",
		otlp + "kafka: {topic_regex: \"^otlp_\", format: otlp_proto}":                             "kafka.topic_regex: otlp_logs is where the receivers forward logs requests",
		otlp + "kafka: {topic_regex: \"^otlp_spans$\", format: otlp_proto}":                       "",
		otlp + "kafka: {topic_regex: \"^app-\"}":                                                  "",
		"otlp: {http: \"127.0.0.1:4318\", forward: {topic: otel}}\nkafka: {topic_regex: \"^ot\"}": "kafka.topic_regex: otel is where the receivers forward requests",
	} {
		cfg, err := FromYAML([]byte(yaml))
		err = errors.Join(err, cfg.Validate())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s:\n got %v\nwant %q", yaml, err, want)
		}
	}
}

// genai.table names none of the tables the configuration writes, as
// DuckDB resolves names: OTEL_SPANS passed the exact comparison with
// sink.table otel_spans, the operations' columns were added to the spans
// table, and `merge --rebuild OTEL_SPANS` emptied it of its spans.
func TestGenAITableIsNoTableTheConfigWrites(t *testing.T) {
	const spans = "kafka: {topics: [t], format: otlp_proto}\n"
	const load = "otlp: {http: \"127.0.0.1:4318\", signals: [traces, logs]}\n"
	for yaml, want := range map[string]string{
		spans + "genai: {table: OTEL_SPANS}":                  "genai.table: OTEL_SPANS is the table otel_spans",
		spans + "genai: {table: main.otel_spans}":             "genai.table: main.otel_spans is the table otel_spans",
		spans + "genai: {table: otel_spans_ledger}":           "genai.table: otel_spans_ledger is the table otel_spans_ledger",
		spans + "genai: {table: otel_spans_dedup}":            "genai.table: otel_spans_dedup is the table otel_spans_dedup",
		load + "genai: {table: Otel_Logs}":                    "genai.table: Otel_Logs is the table otel_logs",
		spans + "genai: {table: llm_ops}":                     "",
		spans + "genai: {table: OTEL_SPANS, operations: off}": "",
	} {
		cfg, err := FromYAML([]byte(yaml))
		err = errors.Join(err, cfg.Validate())
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s:\n got %v\nwant %q", yaml, err, want)
		}
	}
}

// A loader skips another signal's requests on a topic the signals share
// and commits its group past them: loaders of logs and metrics left at
// the default group were in the traces loader's, and whichever ran first
// skipped the others' requests for good. Each signal's loader defaults
// to a group of its own; a group given is kept, and rows of other
// formats keep the plain default.
func TestEachSignalsLoaderDefaultsToItsOwnGroup(t *testing.T) {
	for yaml, want := range map[string]string{
		"kafka: {topics: [t], format: otlp_proto}":                         "tracelake",
		"kafka: {topics: [t], format: otlp_proto, signal: logs}":           "tracelake-logs",
		"kafka: {topics: [t], format: otlp_json, signal: metrics}":         "tracelake-metrics",
		"kafka: {topics: [t], format: otlp_proto, signal: logs, group: g}": "g",
		"kafka: {topics: [t], signal: logs}":                               "tracelake",
	} {
		cfg, err := FromYAML([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Kafka.Group != want {
			t.Errorf("%s: group %q, want %q", yaml, cfg.Kafka.Group, want)
		}
	}
}

// A group given is kept, even the name of the plain default: an
// operator whose Kafka ACLs grant the group tracelake alone, or who
// keeps a logs loader where it ran before this default (a partition
// with a committed offset and no ledger position resumes from the
// group's offset, not from start_offset), set group: tracelake, by
// file, TRACELAKE_KAFKA_GROUP or --group, and it was replaced by
// tracelake-logs all the same, with no way to keep it.
func TestAGroupGivenAsTheDefaultNameIsKept(t *testing.T) {
	const logs = "kafka: {topics: [t], format: otlp_proto, signal: logs"
	cfg, err := FromYAML([]byte(logs + ", group: tracelake}"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kafka.Group != "tracelake" {
		t.Errorf("group: tracelake in the file: group %q, want tracelake", cfg.Kafka.Group)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(logs+"}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRACELAKE_KAFKA_GROUP", "tracelake")
	if cfg, err = FromFile(path); err != nil || cfg.Kafka.Group != "tracelake" {
		t.Errorf("TRACELAKE_KAFKA_GROUP=tracelake: group %q (%v), want tracelake", cfg.Kafka.Group, err)
	}
	os.Unsetenv("TRACELAKE_KAFKA_GROUP")
	if cfg, err = FromFile(path); err != nil || cfg.Kafka.Group != "tracelake-logs" {
		t.Errorf("group left out: group %q (%v), want tracelake-logs", cfg.Kafka.Group, err)
	}
	flag := func(c *Config) { c.Kafka.Group = "tracelake" } // --group tracelake
	if cfg, err = FromFile(path, flag); err != nil || cfg.Kafka.Group != "tracelake" {
		t.Errorf("--group tracelake: group %q (%v), want tracelake", cfg.Kafka.Group, err)
	}
}
