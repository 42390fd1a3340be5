package cdc

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Heartbeat is where heartbeats of a source come from: a table or a
// topic.
//
// A heartbeat table is a source table a job at the source updates every
// little while (Debezium's heartbeat.action.query, or a scheduled UPDATE
// for Canal and Maxwell). Its change comes through the source's log in
// order with every other, so its source time T proves that the connector
// had sent every change made before T by then.
//
// A heartbeat topic holds Debezium's own heartbeat messages
// (__debezium-heartbeat.<topic.prefix>, value {"ts_ms": …}). They prove
// less: the connector sends one after any event once the interval has
// passed, stamped with its wall clock, also while it is behind its log
// (BinlogStreamingChangeEventSource.handleEvent). One counts as reaching
// its time less Lag: the operator's bound on how far behind its log the
// connector runs, as cdc.idle bounds it.
type Heartbeat struct {
	// Database, Schema and Table name a heartbeat table (Schema:
	// PostgreSQL's, "" for MySQL).
	Database, Schema, Table string
	// Topic names a heartbeat topic instead.
	Topic string
	// Lag is subtracted from a heartbeat message's time.
	Lag time.Duration
	// Topics, a regular expression (RE2) matching some of a topic's name,
	// are the topics the same source's changes go to: the partitions a
	// heartbeat speaks for. "" matches every topic; for a heartbeat topic
	// <prefix>.<server>, "" means the topics of Debezium's naming for
	// that server, ^<server>(\.|$): its tables' and its schema change
	// topic.
	Topics string
}

// ParseHeartbeatTable reads "database.table" or "database.schema.table".
func ParseHeartbeatTable(name, topics string) (Heartbeat, error) {
	parts := strings.Split(name, ".")
	h := Heartbeat{Topics: topics}
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		h.Database, h.Table = parts[0], parts[1]
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		h.Database, h.Schema, h.Table = parts[0], parts[1], parts[2]
	default:
		return h, fmt.Errorf("want database.table, or database.schema.table for PostgreSQL, got %q", name)
	}
	return h, checkTopics(topics)
}

// ParseHeartbeatTopic reads a heartbeat topic, <prefix>.<server>.
func ParseHeartbeatTopic(topic, topics string, lag time.Duration) (Heartbeat, error) {
	_, server, ok := strings.Cut(topic, ".")
	if !ok || server == "" {
		return Heartbeat{}, fmt.Errorf("want Debezium's heartbeat topic, <topic.heartbeat.prefix>.<topic.prefix> such as __debezium-heartbeat.dbserver1, got %q", topic)
	}
	if lag < 0 {
		return Heartbeat{}, fmt.Errorf("lag must not be negative, got %s", lag)
	}
	if topics == "" {
		// The server's table topics and its schema change topic, named
		// as the server, which carries its DROP TABLEs (truncations of
		// their tables).
		topics = "^" + regexp.QuoteMeta(server) + `(\.|$)`
	}
	return Heartbeat{Topic: topic, Lag: lag, Topics: topics}, checkTopics(topics)
}

func checkTopics(topics string) error {
	if _, err := regexp.Compile(topics); err != nil {
		return fmt.Errorf("topics: %w", err)
	}
	return nil
}

// Beats keeps the latest heartbeat seen of each heartbeat source, for the
// done marks. Safe for concurrent use.
type Beats struct {
	sources []Heartbeat
	topics  []*regexp.Regexp
	mu      sync.Mutex
	latest  []int64 // source time in µs by source, 0 for none yet
}

// NewBeats keeps the heartbeats of sources (checked by
// ParseHeartbeatTable or ParseHeartbeatTopic); nil when there are none.
func NewBeats(sources []Heartbeat) *Beats {
	if len(sources) == 0 {
		return nil
	}
	b := &Beats{sources: sources, latest: make([]int64, len(sources))}
	for _, s := range sources {
		b.topics = append(b.topics, regexp.MustCompile(s.Topics))
	}
	return b
}

// See records c, read from topic, if it is a change of a heartbeat table
// whose topics match topic, later than the latest seen of it. Its record
// was read, so it was in Kafka before now. Only a change taken from the
// source's log counts (an insert, update or delete): a snapshot row of
// the table (Debezium "r", Maxwell's bootstrap) is read beside the log,
// stamped with the time of the read, and proves nothing about it.
func (b *Beats) See(topic string, c *Change) {
	if b == nil || c.SourceTime == 0 || c.Op < Insert || c.Op > Delete {
		return
	}
	for i, s := range b.sources {
		if s.Table == c.Table.Name && s.Database == c.Table.Database && s.Schema == c.Table.Schema && b.topics[i].MatchString(topic) {
			b.saw(i, c.SourceTime)
		}
	}
}

// SeeMessage records a Debezium heartbeat message read from a heartbeat
// topic (its value {"ts_ms": …}, with or without the schema wrapper), and
// says whether it is one: it is no change. A message with an op is a
// change, whatever its topic, as Debezium's decoder has it.
func (b *Beats) SeeMessage(topic string, value []byte) bool {
	if b == nil {
		return false
	}
	is := false
	for i, s := range b.sources {
		if s.Topic != topic {
			continue
		}
		var m struct {
			TsMs    int64           `json:"ts_ms"`
			Op      json.RawMessage `json:"op"`
			Payload *struct {
				TsMs int64           `json:"ts_ms"`
				Op   json.RawMessage `json:"op"`
			} `json:"payload"`
		}
		if json.Unmarshal(value, &m) != nil {
			continue // not JSON: the decoder dead-letters it
		}
		ms, op := m.TsMs, m.Op
		if m.Payload != nil {
			ms, op = m.Payload.TsMs, m.Payload.Op
		}
		if op != nil {
			return false
		}
		is = true
		if at := time.UnixMilli(ms).Add(-s.Lag).UnixMicro(); ms > 0 && at > 0 {
			b.saw(i, at)
		}
	}
	return is
}

func (b *Beats) saw(i int, t int64) {
	b.mu.Lock()
	b.latest[i] = max(b.latest[i], t)
	b.mu.Unlock()
}

// Beat is the latest heartbeat of a heartbeat source: every change it
// made before SourceTime (µs since the Unix epoch) was sent to a topic
// Topics matches before the heartbeat was read.
type Beat struct {
	SourceTime int64
	Topics     *regexp.Regexp
}

// Latest returns the latest heartbeat of each heartbeat source that has
// had one.
func (b *Beats) Latest() []Beat {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Beat
	for i, t := range b.latest {
		if t > 0 {
			out = append(out, Beat{SourceTime: t, Topics: b.topics[i]})
		}
	}
	return out
}
