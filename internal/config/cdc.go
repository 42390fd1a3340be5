package config

import (
	"cmp"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"github.com/tracelake/tracelake/internal/cdc"
)

// CDC configures database change capture: kafka.format debezium, canal
// or maxwell routes each change to a changelog table of its source table,
// created on first sight.
type CDC struct {
	// LogTable names a source table's changelog table: {database},
	// {schema} and {table} stand for its names, lowercased and made safe;
	// the rest lowercase a-z, 0-9 and _; it must hold {table}. Default
	// cdc_{database}_{table}_log.
	LogTable string `yaml:"log_table"`
	// ModelTable names its modelled table (not built yet; reserved, so a
	// changelog table never takes a model's name). Default
	// cdc_{database}_{table}.
	ModelTable string `yaml:"model_table"`
	// Shards map physical tables to one logical table (order_00..order_63
	// to order), the first match winning.
	Shards []CDCShard `yaml:"shards"`
	// Idle, for done marks (tracelake_ready): a Kafka partition on which
	// nothing has loaded for this long counts as having reached now -
	// Idle in source time, so that the tables of a quiet source are
	// marked. 0 (default): a partition moves on only with its changes.
	Idle Duration `yaml:"idle"`
	// ReadyDelay, for done marks: an hour is marked once every partition
	// has reached its end plus this much source time. A MySQL binlog
	// event's time is when its statement began, while transactions are
	// written at their commit: a transaction begun before the hour's end
	// and committed after a later one comes after changes past the end.
	// Default 1m (the longest transaction expected); 0 marks at the end.
	ReadyDelay Duration `yaml:"ready_delay"`
	// Heartbeats are where the sources' heartbeats come from, which move
	// the done marks of every table whose partitions were loaded to their
	// end after the heartbeat was read (cdc.Heartbeat).
	Heartbeats []CDCHeartbeat `yaml:"heartbeats"`
	// DistributeEvery is how long loaded changes wait in the landing
	// table (<sink.table>_landing) before they move into their changelog
	// tables (or nine times as long as the last move took, if longer);
	// each merge round and the end of a run move them too. Default 30s:
	// each move costs DuckDB about 2 ms per table it writes
	// (docs/BENCHMARKS.md, "cdc_landing").
	DistributeEvery Duration `yaml:"distribute_every"`
	// UnavailablePlaceholder is Debezium's unavailable.value.placeholder,
	// where the connector sets its own ("hex:" and octets, or text);
	// default __debezium_unavailable_value. An update holding it keeps
	// the column's earlier value in the model, a create (of an update
	// that changed the primary key) the old key's (the changelog row
	// names the column in cdc_unavailable); a snapshot read or a key
	// holding it is dead-lettered. It is never stored as a value.
	UnavailablePlaceholder string `yaml:"unavailable_placeholder"`
}

// CDCShard maps the source tables it matches to one logical table.
type CDCShard struct {
	// Database and Table are regular expressions (RE2) matching the whole
	// name; empty matches any.
	Database string `yaml:"database"`
	Table    string `yaml:"table"`
	// AsDatabase and AsTable are the logical names; empty keeps the
	// source's.
	AsDatabase string `yaml:"as_database"`
	AsTable    string `yaml:"as_table"`
}

// CDCHeartbeat is where a source's heartbeats come from: a source table
// whose changes are heartbeats, or Debezium's heartbeat topic.
type CDCHeartbeat struct {
	// Table is database.table (database.schema.table for PostgreSQL).
	Table string `yaml:"table"`
	// Topic is Debezium's heartbeat topic (__debezium-heartbeat.<server>),
	// instead of Table.
	Topic string `yaml:"topic"`
	// Lag, with Topic, is how far behind its log the connector may run:
	// a heartbeat message counts as reaching its time less Lag.
	Lag Duration `yaml:"lag"`
	// Topics is a regular expression (RE2) matching the topics its
	// source's changes go to; empty matches every topic read (with
	// Topic, those of Debezium's naming for its server).
	Topics string `yaml:"topics"`
}

// parse checks h and returns it as the decoder takes it.
func (h CDCHeartbeat) parse(format string) (cdc.Heartbeat, error) {
	switch {
	case (h.Table == "") == (h.Topic == ""):
		return cdc.Heartbeat{}, fmt.Errorf("want table (a source table whose changes are heartbeats) or topic (Debezium's heartbeat topic), one of them, got table %q and topic %q", h.Table, h.Topic)
	case h.Table != "" && h.Lag != 0:
		return cdc.Heartbeat{}, fmt.Errorf("lag applies to a heartbeat topic: a heartbeat table's changes come through the source's log, got lag %s", h.Lag.D())
	case h.Table != "":
		return cdc.ParseHeartbeatTable(h.Table, h.Topics)
	case format != FormatDebezium:
		return cdc.Heartbeat{}, fmt.Errorf("topic: heartbeat messages are Debezium's, and kafka.format is %s (use a heartbeat table)", format)
	}
	return cdc.ParseHeartbeatTopic(h.Topic, h.Topics, h.Lag.D())
}

// Heartbeats are cdc.heartbeats, as validated.
func (c *Config) Heartbeats() []cdc.Heartbeat {
	var out []cdc.Heartbeat
	for _, h := range c.CDC.Heartbeats {
		if p, err := h.parse(c.Kafka.Format); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// The kafka.format values of database change events.
const (
	FormatCanal   = "canal"
	FormatMaxwell = "maxwell"
	// FormatDebezium is also a model's format (merge.go).
)

// CapturesChanges reports whether the messages are database change
// events, routed to changelog tables (kafka.format debezium, canal or
// maxwell).
func (c *Config) CapturesChanges() bool {
	return slices.Contains([]string{FormatDebezium, FormatCanal, FormatMaxwell}, c.Kafka.Format)
}

// CDCOptions are the change decoder's options.
func (c *Config) CDCOptions() cdc.Options {
	o := cdc.Options{Format: cdc.Format(c.Kafka.Format), LogTemplate: c.CDC.LogTable, ModelTemplate: c.CDC.ModelTable,
		UnavailablePlaceholder: c.CDC.UnavailablePlaceholder}
	for _, s := range c.CDC.Shards {
		o.Shards = append(o.Shards, cdc.Shard{Database: s.Database, Table: s.Table, AsDatabase: s.AsDatabase, AsTable: s.AsTable})
	}
	return o
}

// cdcTable is sink.table's default with database change capture: it
// names the dead-letter, ledger and registry tables (cdc_dlq, cdc_ledger,
// cdc_routes); the changes themselves go to the changelog tables.
const cdcTable = "cdc"

func (c *Config) validateCDC(check func(ok bool, key, format string, args ...any)) {
	if !c.CapturesChanges() {
		// Each key set, by name (every key: ready_delay, left out of a
		// list of them, was accepted and ignored).
		for _, key := range changedKeys("cdc", reflect.ValueOf(c.CDC), reflect.ValueOf(Default().CDC)) {
			check(false, key, "applies to kafka.format debezium, canal or maxwell, got kafka.format %s", c.Kafka.Format)
		}
		return
	}
	// One error per key: each is checked alone, against the defaults.
	one := func(key string, o cdc.Options) {
		o.Format = cdc.FormatDebezium
		_, err := cdc.NewDecoder(o)
		check(err == nil, key, "%v", err)
	}
	one("cdc.log_table", cdc.Options{LogTemplate: c.CDC.LogTable})
	one("cdc.model_table", cdc.Options{ModelTemplate: c.CDC.ModelTable})
	if c.Kafka.Format == FormatDebezium {
		one("cdc.unavailable_placeholder", cdc.Options{UnavailablePlaceholder: c.CDC.UnavailablePlaceholder})
	} else {
		check(c.CDC.UnavailablePlaceholder == "", "cdc.unavailable_placeholder", "is Debezium's placeholder, and kafka.format is %s", c.Kafka.Format)
	}
	opts := c.CDCOptions()
	for i, s := range opts.Shards {
		one(fmt.Sprintf("cdc.shards[%d]", i), cdc.Options{Shards: []cdc.Shard{s}})
	}
	for i, h := range c.CDC.Heartbeats {
		key := fmt.Sprintf("cdc.heartbeats[%d]", i)
		_, err := h.parse(c.Kafka.Format)
		check(err == nil, key, "%v", err)
		if err == nil && h.Topic != "" {
			re, rerr := regexp.Compile(c.Kafka.TopicRegex)
			read := slices.Contains(c.Kafka.Topics, h.Topic) || c.Kafka.TopicRegex != "" && rerr == nil && re.MatchString(h.Topic)
			check(read, key, "topic %s is not read: add it to kafka.topics (or let kafka.topic_regex match it), or its heartbeats never come", h.Topic)
		}
	}
	check(c.CDC.Idle >= 0, "cdc.idle", "must not be negative, got %s", c.CDC.Idle.D())
	check(c.CDC.ReadyDelay >= 0, "cdc.ready_delay", "must not be negative, got %s", c.CDC.ReadyDelay.D())
	check(c.CDC.DistributeEvery >= 0, "cdc.distribute_every", "must not be negative, got %s (0: the default, 30s)", c.CDC.DistributeEvery.D())
	log, model := cmp.Or(c.CDC.LogTable, cdc.DefaultLogTemplate), cmp.Or(c.CDC.ModelTable, cdc.DefaultModelTemplate)
	check(log != model, "cdc.model_table", "must differ from cdc.log_table (%s): a changelog and a model table would share a name", log)
	check(c.Sink.Type == SinkDuckDB, "kafka.format",
		"%s routes changes to changelog tables, built for sink.type duckdb only for now, got sink.type %s", c.Kafka.Format, c.Sink.Type)
	check(c.Mode == ModeRaw, "mode", "with kafka.format %s the changes go to changelog tables (accepted: raw)", c.Kafka.Format)
	check(len(c.Merge.Models) == 0, "merge.models", "models read the raw table's JSON; with kafka.format %s the changes are in changelog tables", c.Kafka.Format)
	check(!c.LoadsReceived(), "otlp.mode", "load writes OpenTelemetry rows, and kafka.format %s routes changes to changelog tables: use otlp.mode forward, or another process", c.Kafka.Format)
}
