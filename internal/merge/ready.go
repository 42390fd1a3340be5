package merge

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// ReadyTable holds the done marks of changelog models: a row per model
// table and hour of source time once the model holds every change of
// the hour, for batch jobs to wait on (`tracelake ready`).
const ReadyTable = "tracelake_ready"

// readyTableSQL creates ReadyTable.
const readyTableSQL = `CREATE TABLE IF NOT EXISTS ` + ReadyTable + ` ("table" VARCHAR, hour TIMESTAMP, marked_at TIMESTAMP)`

// Marking is what MarkReady goes by besides the tables.
type Marking struct {
	// Now is the time of the marks.
	Now time.Time
	// Idle (> 0): a partition on which nothing has loaded for Idle (by
	// the ledger) counts as having reached Now - Idle.
	Idle time.Duration
	// Beats are the latest heartbeats read (cdc.Beats.Latest), and Ends
	// lists the log start and last stable offsets of the partitions of
	// those of topics that exist: MarkReady asks it after it has the
	// beats.
	Beats []cdc.Beat
	Ends  func(ctx context.Context, topics []string) (map[sink.TopicPartition]Offsets, error)
}

// Offsets are where a partition's log starts and its last stable offset.
type Offsets struct{ Start, End int64 }

// MarkReady marks the hours each changelog model is complete for and
// returns how many marks it wrote, in one transaction.
//
// A model is complete up to a source time T when, on every Kafka
// partition that feeds its changelog table, a change of source time T or
// later has loaded (of any table: a partition carries its changes in the
// source's log order) and the model is merged up to all its table's rows
// loaded there. An hour is marked once T reaches its end, from the hour
// of the table's first change on, each hour once.
//
// A quiet partition moves on two ways. A heartbeat of source time T
// (m.Beats) moves each partition of its source's topics that has loaded
// every record below its last stable offset as listed after the
// heartbeat was read: whatever the source sent before T was in Kafka by
// then. And with m.Idle, a partition on which nothing has loaded for
// Idle counts as having reached Now - Idle (the source's clock and ours
// assumed within Idle of each other, its lag under Idle).
//
// A table with changes still in the sink's landing table (not moved into
// it yet, or unable to move: see duckdb.Landing) is marked no further:
// its partitions' progress, which the other tables move, does not hold
// for it.
func (c *ChangelogMerger) MarkReady(ctx context.Context, m Marking) (int64, error) {
	beats, err := c.beatsReached(ctx, m)
	if err != nil {
		return 0, err
	}
	dead, err := c.deadLettered(ctx)
	if err != nil {
		return 0, err
	}
	if beforeMarking != nil {
		beforeMarking()
	}
	var marked int64
	err = c.mg.inTx(ctx, func(tx *sql.Tx) error {
		if err := exec(ctx, tx, readyTableSQL, watermarkTableSQL); err != nil {
			return fmt.Errorf("create %s: %w", ReadyTable, err)
		}
		quiet := "NULL::TIMESTAMP"
		if m.Idle > 0 {
			quiet = fmt.Sprintf(`CASE WHEN l.loaded_at <= $1::TIMESTAMP - INTERVAL %[1]d MICROSECONDS THEN $1::TIMESTAMP - INTERVAL %[1]d MICROSECONDS END`, m.Idle.Microseconds())
		}
		// A partition is quiet when nothing has loaded on it (the
		// ledger), not when nothing has moved: its changes land first.
		// A table's changes may come on any partition of its topics (a
		// new key hashes anywhere), so each of them, known from the
		// ledger, from any table's rows or from a heartbeat's listing,
		// must have reached the hour's end; one of unknown progress
		// (nothing loaded, or no source time yet) holds the table back.
		q := fmt.Sprintf(`INSERT INTO %[1]s
WITH loads AS (
	SELECT topic, "partition", max(loaded_at) AS loaded_at, max(last_offset) + 1 AS next_offset FROM %[7]s GROUP BY topic, "partition"
), beats AS (
	%[8]s
), parts AS (
	SELECT topic, "partition" FROM loads UNION SELECT topic, "partition" FROM %[3]s UNION SELECT topic, "partition" FROM beats
), fed AS (
	SELECT topic, "partition", max(last_source_time) AS t FROM %[3]s GROUP BY topic, "partition"
), part AS (
	SELECT p.topic, p."partition", greatest(any_value(f.t), any_value(%[2]s), max(b.t)) AS reached
	FROM parts p LEFT JOIN fed f ON f.topic = p.topic AND f."partition" = p."partition"
	LEFT JOIN loads l ON l.topic = p.topic AND l."partition" = p."partition"
	LEFT JOIN beats b ON b.topic = p.topic AND b."partition" = p."partition" AND greatest(l.next_offset, b.start_offset) >= b.end_offset
	GROUP BY p.topic, p."partition"
), through AS (
	SELECT t.log_table, CASE WHEN bool_or(p.reached IS NULL) THEN NULL ELSE min(p.reached) END AS through
	FROM (SELECT DISTINCT log_table, topic FROM %[3]s) t JOIN part p ON p.topic = t.topic GROUP BY t.log_table
), dead AS (
	%[9]s
), held AS (
	SELECT log_table, min(t) AS t, bool_or(t IS NULL) AS unknown FROM dead GROUP BY log_table
), model AS (
	SELECT o.log_table, r.model_table, min(o.first_source_time) AS first_t,
		CASE WHEN any_value(h.unknown) THEN NULL ELSE least(any_value(th.through), any_value(h.t)) END AS through,
		bool_and(coalesce(w.next_offset, 0) >= o.next_offset) AS merged
	FROM %[3]s o JOIN through th ON th.log_table = o.log_table LEFT JOIN held h ON h.log_table = o.log_table
	JOIN %[4]s r ON r.log_table = o.log_table AND r.model_table IS NOT NULL
	LEFT JOIN %[5]s w ON w.model = r.model_table AND w.topic = o.topic AND w."partition" = o."partition"
	WHERE o.first_source_time IS NOT NULL AND o.log_table NOT IN (SELECT log_table FROM %[6]s)
	GROUP BY o.log_table, r.model_table
), due AS (
	SELECT m.model_table, date_trunc('hour', coalesce(max(d.hour) + INTERVAL 1 HOUR, min(m.first_t))) AS from_hour,
		date_trunc('hour', min(m.through)) - INTERVAL 1 HOUR AS to_hour
	FROM model m LEFT JOIN %[1]s d ON d."table" = m.model_table
	WHERE m.merged GROUP BY m.model_table
)
SELECT model_table, unnest(generate_series(from_hour, to_hour, INTERVAL 1 HOUR)), $1::TIMESTAMP FROM due WHERE from_hour <= to_hour`,
			ReadyTable, quiet, c.reached, c.routes, WatermarkTable, c.landing, c.ledger, beats, dead)
		r, err := tx.ExecContext(ctx, q, m.Now.UTC())
		if err != nil {
			return fmt.Errorf("mark the hours the changelog models are complete for: %w", err)
		}
		marked = rowsAffected(r)
		return nil
	})
	return marked, err
}

// deadLettered is the query of the changes in the dead-letter table, a
// row (log_table, t) each: its changelog table and its source time (NULL
// when it has none). A table's model lacks them until a replay: it is
// complete up to the first at most. A dead letter that does not decode
// as a change (not a change event at all) is no table's.
func (c *ChangelogMerger) deadLettered(ctx context.Context) (string, error) {
	const none = `SELECT NULL::VARCHAR AS log_table, NULL::TIMESTAMP AS t WHERE false`
	rows, err := c.mg.db.QueryContext(ctx, `SELECT topic, "key", "value" FROM `+c.dlq)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", c.dlq, err)
	}
	defer rows.Close()
	first := map[string]int64{} // log table → earliest source time, 0 for one without
	var changes []cdc.Change
	for rows.Next() {
		var topic string
		var key, value []byte
		if err := rows.Scan(&topic, &key, &value); err != nil {
			return "", fmt.Errorf("read %s: %w", c.dlq, err)
		}
		changes, err = c.dec.Decode(changes[:0], topic, key, value)
		if err != nil {
			continue
		}
		for _, ch := range changes {
			if ch.Op.Letter() == 0 {
				continue
			}
			if t, ok := first[ch.Table.Log]; !ok || t != 0 && (ch.SourceTime == 0 || ch.SourceTime < t) {
				first[ch.Table.Log] = ch.SourceTime
			}
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", c.dlq, err)
	}
	if len(first) == 0 {
		return none, nil
	}
	values := make([]string, 0, len(first))
	for table, t := range first {
		at := "NULL::TIMESTAMP"
		if t != 0 {
			at = fmt.Sprintf("make_timestamp(%d)", t)
		}
		values = append(values, fmt.Sprintf("(%s, %s)", sqltext.String(table), at))
	}
	slices.Sort(values)
	return `SELECT * FROM (VALUES ` + strings.Join(values, ", ") + `) AS d(log_table, t)`, nil
}

// beatsReached is the query of what the heartbeats reached: a row (topic,
// partition, start_offset, end_offset, t) for each partition of a
// heartbeat's topics that feeds a changelog table, with its log start and
// last stable offset listed after the heartbeat of source time t was
// read. A partition counts as reaching t once it loaded to its end, or
// has nothing left to load: its log starts at its end (records deleted
// before they were read are lost, and verify says so).
func (c *ChangelogMerger) beatsReached(ctx context.Context, m Marking) (string, error) {
	const none = `SELECT NULL::VARCHAR AS topic, NULL::INTEGER AS "partition", NULL::BIGINT AS start_offset, NULL::BIGINT AS end_offset, NULL::TIMESTAMP AS t WHERE false`
	if len(m.Beats) == 0 || m.Ends == nil {
		return none, nil
	}
	rows, err := c.mg.db.QueryContext(ctx, `SELECT DISTINCT topic FROM `+c.reached+` ORDER BY topic`)
	if err != nil {
		return "", fmt.Errorf("read the topics of %s: %w", c.reached, err)
	}
	var topics []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return "", fmt.Errorf("read the topics of %s: %w", c.reached, err)
		}
		if slices.ContainsFunc(m.Beats, func(b cdc.Beat) bool { return b.Topics.MatchString(t) }) {
			topics = append(topics, t)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read the topics of %s: %w", c.reached, err)
	}
	if len(topics) == 0 {
		return none, nil
	}
	ends, err := m.Ends(ctx, topics)
	if err != nil {
		// The marks that need no heartbeat go on; these wait for the
		// next round.
		c.mg.log.Warn("the end offsets of the heartbeats' topics could not be listed; done marks go by the changes alone this round", "err", err)
		return none, nil
	}
	var values []string
	for tp, o := range ends {
		for _, b := range m.Beats {
			if b.Topics.MatchString(tp.Topic) {
				values = append(values, fmt.Sprintf("(%s, %d, %d, %d, make_timestamp(%d))", sqltext.String(tp.Topic), tp.Partition, o.Start, o.End, b.SourceTime))
			}
		}
	}
	if len(values) == 0 {
		return none, nil
	}
	slices.Sort(values)
	return `SELECT * FROM (VALUES ` + strings.Join(values, ", ") + `) AS b(topic, "partition", start_offset, end_offset, t)`, nil
}

// beforeMarking, set by tests, runs in MarkReady just before the
// transaction that writes the marks (loads go on meanwhile in a run).
var beforeMarking func()

// Ready says whether table's hour (truncated to the hour) is marked.
func Ready(ctx context.Context, db *sql.DB, table string, hour time.Time) (bool, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+sqltext.Ident(ReadyTable)+` WHERE "table" = ? AND hour = ?`,
		table, hour.UTC().Truncate(time.Hour)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", ReadyTable, err)
	}
	return n > 0, nil
}
