package cdc

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// HeartbeatTable is a source table whose changes are heartbeats: a row a
// job at the source updates every little while (Debezium's
// heartbeat.action.query, or a scheduled UPDATE for Canal and Maxwell).
// Its change comes through the source's log in order with every other,
// so its source time T proves that the connector had sent every change
// made before T by then. Debezium's own heartbeat messages
// (__debezium-heartbeat.*) prove no such thing: the connector sends them
// after any event once the interval has passed, stamped with the wall
// clock, also while it is hours behind its log.
type HeartbeatTable struct {
	// Database, Schema and Table name the source table (Schema:
	// PostgreSQL's, "" for MySQL).
	Database, Schema, Table string
	// Topics, a regular expression (RE2) matching some of a topic's name,
	// are the topics the same source's changes go to: the partitions a
	// heartbeat speaks for. "" matches every topic.
	Topics string
}

// ParseHeartbeatTable reads "database.table" or "database.schema.table".
func ParseHeartbeatTable(name, topics string) (HeartbeatTable, error) {
	parts := strings.Split(name, ".")
	h := HeartbeatTable{Topics: topics}
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		h.Database, h.Table = parts[0], parts[1]
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		h.Database, h.Schema, h.Table = parts[0], parts[1], parts[2]
	default:
		return h, fmt.Errorf("want database.table, or database.schema.table for PostgreSQL, got %q", name)
	}
	if _, err := regexp.Compile(topics); err != nil {
		return h, fmt.Errorf("topics: %w", err)
	}
	return h, nil
}

// Beats keeps the latest heartbeat seen of each heartbeat table, for the
// done marks. Safe for concurrent use.
type Beats struct {
	tables []HeartbeatTable
	topics []*regexp.Regexp
	mu     sync.Mutex
	latest []int64 // source time in µs by table, 0 for none yet
}

// NewBeats keeps the heartbeats of tables (checked by
// ParseHeartbeatTable); nil when there are none.
func NewBeats(tables []HeartbeatTable) *Beats {
	if len(tables) == 0 {
		return nil
	}
	b := &Beats{tables: tables, latest: make([]int64, len(tables))}
	for _, t := range tables {
		b.topics = append(b.topics, regexp.MustCompile(t.Topics))
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
	for i, t := range b.tables {
		if t.Table == c.Table.Name && t.Database == c.Table.Database && t.Schema == c.Table.Schema && b.topics[i].MatchString(topic) {
			b.mu.Lock()
			b.latest[i] = max(b.latest[i], c.SourceTime)
			b.mu.Unlock()
		}
	}
}

// Beat is the latest heartbeat of a heartbeat table: every change its
// source made before SourceTime (µs since the Unix epoch) was sent to a
// topic Topics matches before the heartbeat was read.
type Beat struct {
	SourceTime int64
	Topics     *regexp.Regexp
}

// Latest returns the latest heartbeat of each heartbeat table that has
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
