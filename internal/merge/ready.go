package merge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
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
	// Delay: an hour is marked once its table's partitions have reached
	// its end plus Delay (cdc.ready_delay: a MySQL change's time is when
	// its statement began, and a transaction comes at its commit).
	Delay time.Duration
	// Beats are the latest heartbeats read (cdc.Beats.Latest).
	Beats []cdc.Beat
	// Ends, when set, lists the log start and last stable offsets of the
	// partitions of those of topics that exist, and of every other topic
	// read (kafka.topics, or those kafka.topic_regex matches now);
	// MarkReady asks it for the changelog tables' topics, after it has
	// the beats. Without it, a partition nothing has loaded from yet is
	// not known, and holds no table back (nor does a heartbeat move
	// anything).
	Ends func(ctx context.Context, topics []string) (map[sink.TopicPartition]Offsets, error)
	// Committed, when set, lists the consumer group's committed offsets,
	// asked before the marks' snapshot: where the group's reading of a
	// partition nothing has loaded from starts (kafka.start_offset
	// latest commits its start alone), the records below it not to load.
	// Offsets are committed after their loads, so one listed before the
	// snapshot is never past what the snapshot loaded.
	Committed func(ctx context.Context) (map[sink.TopicPartition]int64, error)

	// beforeMarking, set by tests, runs just before the transaction that
	// reads the tables and writes the marks (loads go on meanwhile).
	beforeMarking func()
}

// Offsets are where a partition's log starts and its last stable offset.
type Offsets struct{ Start, End int64 }

// MarkReady marks the hours each changelog model is complete for and
// returns how many marks it wrote, in one transaction.
//
// A model is complete up to a source time T when, on every Kafka
// partition of its changelog table's topics, a change of source time T or
// later has loaded (of any table: a partition carries its changes in the
// source's log order; a snapshot row, read beside the log, is none), the
// model is merged up to all its table's rows loaded there, and no change
// of the table before T is dead-lettered. An hour is marked once T
// reaches its end plus m.Delay, from the hour of the table's first change on, each
// hour once; T is taken no further than m.Now (by a CASE: DuckDB's least
// skips a NULL, an unknown T), so that a source time in the future (a
// source clock ahead, a wrong time in a row) never marks an hour that has
// not ended. A partition with records not loaded and none loaded, or none
// with a source time, is of unknown progress and holds its tables back.
//
// A quiet partition moves on two ways. A heartbeat of source time T
// (m.Beats) moves each partition of its source's topics that has loaded
// every record below its last stable offset as listed after the
// heartbeat was read, or has none to load (its log starts at its end):
// whatever the source sent before T was in Kafka by then. And with
// m.Idle, a partition on which nothing has loaded for Idle counts as
// having reached Now - Idle (the source's clock and ours assumed within
// Idle of each other, its lag under Idle).
//
// A table with changes still in the sink's landing table (not moved into
// it yet, or unable to move: see duckdb.Landing) is marked no further:
// its partitions' progress, which the other tables move, does not hold
// for it.
//
// A table's topics are those its changes came from so far, and, while a
// partition of it has records to load, the schema change topics of its
// Debezium server, which carry its DROP TABLE and DROP DATABASE whether
// a change of the table came from them yet or not (a dead letter of no
// table on one holds the table back too): the topic named as the server
// (Debezium's default, known before it loads anything) and every topic
// on which a schema change message of the server loaded, whatever its
// name (a RegexRouter or a topic naming strategy renames it), which the
// load recorded in the sink's <table>_routes_schema_topics; a
// topic read
// that no table's changes came from yet, with records to load on a
// partition nothing has loaded from, holds every table back: it may carry
// any table's changes (a shard's, when the source names a topic per
// table, or a table's of a second server), and which is known only once
// they load.
func (c *ChangelogMerger) MarkReady(ctx context.Context, m Marking) (int64, error) {
	var committed map[sink.TopicPartition]int64
	if m.Committed != nil {
		var err error
		if committed, err = m.Committed(ctx); err != nil {
			c.mg.log.Warn("the consumer group's offsets could not be listed; no hour is marked this round", "err", err)
			return 0, nil
		}
	}
	var marked int64
	err := c.mg.inTx(ctx, func(tx *sql.Tx) error {
		// The sink creates the schema change topics' table (Prepare); a
		// database of a release before it has it from here on, empty.
		if err := exec(ctx, tx, readyTableSQL, watermarkTableSQL,
			`CREATE TABLE IF NOT EXISTS `+c.schemaTopics+` (server VARCHAR, topic VARCHAR, first_seen TIMESTAMP)`); err != nil {
			return fmt.Errorf("create %s: %w", ReadyTable, err)
		}
		// The transaction's snapshot is taken by its first statement,
		// above; the listing comes after it, so that a record it does not
		// show was appended after everything the snapshot loaded.
		ends, beats, ok, err := c.listed(ctx, tx, m, committed)
		if err != nil || !ok {
			return err
		}
		if m.beforeMarking != nil {
			m.beforeMarking()
		}
		dead, err := c.deadLettered(ctx, tx)
		if err != nil {
			return err
		}
		// A partition is quiet when nothing has loaded on it (the
		// ledger), not when nothing has moved: its changes land first;
		// and not when the listing shows records on it to load.
		quiet := "NULL::TIMESTAMP"
		if m.Idle > 0 {
			quiet = fmt.Sprintf(`CASE WHEN l.loaded_at <= $1::TIMESTAMP - INTERVAL (%[1]d) MICROSECONDS
		AND (e.end_offset IS NULL OR greatest(l.next_offset, e.start_offset) >= e.end_offset)
		THEN $1::TIMESTAMP - INTERVAL (%[1]d) MICROSECONDS END`, m.Idle.Microseconds())
		}
		// A table's changes may come on any partition of its topics (a
		// new key hashes anywhere), so each of them, known from the
		// ledger, from any table's rows or from the listing of ends,
		// must have reached the hour's end; one of unknown progress
		// (records to load and none loaded, or none with a source time)
		// holds the table back, and so does a dead letter of the table
		// (or, one that is no change event, of its topic), and a topic
		// of no table yet with a partition of unknown progress (unread:
		// its changes may be any table's). The schema change topics of a
		// table's Debezium servers (the registry's source_server) carry
		// its DROP TABLE: the topic named as the server, and each topic
		// a schema change message of the server loaded from, whatever
		// its name (schemaTopics, recorded by the load); a partition of
		// one with records to load holds the table back as one of its
		// own topics' does, and a dead letter on it of no table as one
		// on its own topics does, whether a change of the table came
		// from that topic yet or not (carriers). A last source time
		// further past its load than duckdb.ReachedPastLoad is misread,
		// no progress: it held every hour up to now marked done.
		q := fmt.Sprintf(`INSERT INTO %[1]s
WITH loads AS (
	SELECT topic, "partition", max(loaded_at) AS loaded_at, max(last_offset) + 1 AS next_offset FROM %[7]s GROUP BY topic, "partition"
), ends AS (
	%[8]s
), beats AS (
	%[9]s
), parts AS (
	SELECT topic, "partition" FROM loads UNION SELECT topic, "partition" FROM %[3]s
	UNION SELECT e.topic, e."partition" FROM ends e LEFT JOIN loads l ON l.topic = e.topic AND l."partition" = e."partition"
		WHERE greatest(l.next_offset, e.start_offset) < e.end_offset
), fed AS (
	SELECT topic, "partition", max(last_source_time) FILTER (WHERE last_source_time <= loaded_at + INTERVAL (%[13]d) MICROSECONDS) AS t
	FROM %[3]s GROUP BY topic, "partition"
), part AS (
	SELECT p.topic, p."partition", greatest(any_value(f.t), any_value(%[2]s), max(b.t)) AS reached,
		coalesce(any_value(greatest(l.next_offset, e.start_offset) < e.end_offset), false) AS behind
	FROM parts p LEFT JOIN fed f ON f.topic = p.topic AND f."partition" = p."partition"
	LEFT JOIN loads l ON l.topic = p.topic AND l."partition" = p."partition"
	LEFT JOIN ends e ON e.topic = p.topic AND e."partition" = p."partition"
	LEFT JOIN beats b ON b.topic = p.topic AND greatest(l.next_offset, e.start_offset) >= e.end_offset
	GROUP BY p.topic, p."partition"
), servers AS (
	SELECT log_table, server FROM (
		SELECT log_table, trim(unnest(string_split(coalesce(source_server, ''), ','))) AS server FROM %[4]s) WHERE server <> ''
), carriers AS (
	SELECT DISTINCT log_table, topic, true AS own FROM %[3]s
	UNION ALL SELECT log_table, server, false FROM servers
	UNION ALL SELECT s.log_table, st.topic, false FROM servers s JOIN %[12]s st ON st.server = s.server
), through AS (
	SELECT t.log_table, CASE WHEN bool_or(p.reached IS NULL) THEN NULL ELSE min(p.reached) END AS through
	FROM carriers t JOIN part p ON p.topic = t.topic AND (t.own OR p.behind) GROUP BY t.log_table
), dead AS (
	%[10]s
), unread AS (
	SELECT DISTINCT e.topic FROM ends e LEFT JOIN loads l ON l.topic = e.topic AND l."partition" = e."partition"
	WHERE l.topic IS NULL AND e.start_offset < e.end_offset AND e.topic NOT IN (SELECT topic FROM %[3]s)
), held AS (
	SELECT log_table, min(t) AS t, bool_or(t IS NULL) AS unknown FROM (
		SELECT log_table, t FROM dead WHERE log_table IS NOT NULL
		UNION ALL SELECT DISTINCT o.log_table, NULL::TIMESTAMP FROM dead d JOIN carriers o ON o.topic = d.topic WHERE d.log_table IS NULL
		UNION ALL SELECT DISTINCT log_table, NULL::TIMESTAMP FROM %[3]s WHERE EXISTS (FROM unread)
	) GROUP BY log_table
), model AS (
	SELECT o.log_table, r.model_table, min(o.first_source_time) AS first_t,
		CASE WHEN any_value(h.unknown) OR any_value(th.through) IS NULL THEN NULL ELSE least(any_value(th.through), any_value(h.t)) END AS through,
		bool_and(coalesce(w.next_offset, 0) >= o.next_offset) AS merged
	FROM %[3]s o JOIN through th ON th.log_table = o.log_table LEFT JOIN held h ON h.log_table = o.log_table
	JOIN %[4]s r ON r.log_table = o.log_table AND r.model_table IS NOT NULL
	LEFT JOIN %[5]s w ON w.model = r.model_table AND w.topic = o.topic AND w."partition" = o."partition"
	WHERE o.first_source_time IS NOT NULL AND o.log_table NOT IN (SELECT log_table FROM %[6]s)
	GROUP BY o.log_table, r.model_table
), due AS (
	SELECT m.model_table, date_trunc('hour', coalesce(max(d.hour) + INTERVAL 1 HOUR, min(m.first_t))) AS from_hour,
		date_trunc('hour', CASE WHEN min(m.through) > $1::TIMESTAMP THEN $1::TIMESTAMP ELSE min(m.through) END
			- INTERVAL (%[11]d) MICROSECONDS) - INTERVAL 1 HOUR AS to_hour
	FROM model m LEFT JOIN %[1]s d ON d."table" = m.model_table
	WHERE m.merged GROUP BY m.model_table
)
SELECT model_table, unnest(generate_series(from_hour, to_hour, INTERVAL 1 HOUR)), $1::TIMESTAMP FROM due WHERE from_hour <= to_hour`,
			ReadyTable, quiet, c.reached, c.routes, WatermarkTable, c.landing, c.ledger, ends, beats, dead, m.Delay.Microseconds(),
			c.schemaTopics, duckdb.ReachedPastLoad.Microseconds())
		r, err := tx.ExecContext(ctx, q, m.Now.UTC())
		if err != nil {
			return fmt.Errorf("mark the hours the changelog models are complete for: %w", err)
		}
		marked = rowsAffected(r)
		return nil
	})
	return marked, err
}

// deadLettered is the query of the dead letters' tables, rows
// (log_table, topic, t): a change's changelog table and source time (NULL
// when it has none), or, for a dead letter that does not decode as a
// change (not a change event at all, or one whose row the decoder
// refuses), its topic alone. A table's model lacks its dead-lettered
// changes until a replay: it is complete up to the first at most; one of
// unknown table holds every table of its topic. They are decoded as the
// pipeline decodes (the registry's tables claim their names), by a
// decoder of their own: a change of a table whose name another claims is
// no table's.
func (c *ChangelogMerger) deadLettered(ctx context.Context, tx *sql.Tx) (string, error) {
	letters, err := c.deadLetters(ctx, tx)
	if err != nil {
		return "", err
	}
	first := map[string]int64{}  // log table → earliest source time, 0 for one without
	unknown := map[string]bool{} // topics of dead letters of no known table
	for _, d := range letters {
		if d.unknown {
			unknown[d.topic] = true
		}
		for table, t := range d.tables {
			hold(first, table, t)
		}
	}
	if len(unknown) > 0 {
		c.mg.log.Warn("dead letters that are no change event hold back the done marks of every table of their topics; replay them once they decode, or delete them", "topics", slices.Sorted(maps.Keys(unknown)))
	}
	var values []string
	for table, t := range first {
		at := "NULL::TIMESTAMP"
		if t != 0 {
			at = fmt.Sprintf("make_timestamp(%d)", t)
		}
		values = append(values, fmt.Sprintf("(%s, NULL, %s)", sqltext.String(table), at))
	}
	for topic := range unknown {
		values = append(values, fmt.Sprintf("(NULL, %s, NULL::TIMESTAMP)", sqltext.String(topic)))
	}
	return valuesQuery(values, "log_table VARCHAR, topic VARCHAR, t TIMESTAMP"), nil
}

// deadLetter is what a dead letter says of the done marks: the changelog
// tables of its changes with the earliest source time of each (0 for
// none), or that it decodes to no table (unknown: its topic's tables).
type deadLetter struct {
	topic   string
	tables  map[string]int64
	unknown bool
}

// hold records in from that table is held back from source time t (0:
// unknown, before any), keeping the earliest.
func hold(from map[string]int64, table string, t int64) {
	if was, ok := from[table]; !ok || was != 0 && (t == 0 || t < was) {
		from[table] = t
	}
}

// deadKey is a dead letter's record.
type deadKey struct {
	topic     string
	partition int32
	offset    int64
}

// deadLetters returns what each dead letter says, decoding only those
// not decoded by an earlier round: a round reads the dead-letter table's
// coordinates, and the values (up to 12 MB each) of the new ones alone,
// however many dead letters wait for a replay. A dead letter's record
// decodes the same way every time; one whose table's name a table
// registered since claims (no table's now) keeps holding that table back
// until it is replayed or deleted, the safe side.
func (c *ChangelogMerger) deadLetters(ctx context.Context, tx *sql.Tx) (map[deadKey]deadLetter, error) {
	c.deadMu.Lock()
	defer c.deadMu.Unlock()
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT topic, "partition", "offset" FROM `+c.dlq)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.dlq, err)
	}
	now := map[deadKey]deadLetter{}
	var missing []string
	for rows.Next() {
		var k deadKey
		if err := rows.Scan(&k.topic, &k.partition, &k.offset); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read %s: %w", c.dlq, err)
		}
		if d, ok := c.dead[k]; ok {
			now[k] = d
		} else {
			missing = append(missing, fmt.Sprintf("(%s, %d, %d)", sqltext.String(k.topic), k.partition, k.offset))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", c.dlq, err)
	}
	if len(missing) > 0 {
		if err := c.decodeDead(ctx, tx, missing, now); err != nil {
			return nil, err
		}
	}
	c.dead = now // the replayed and deleted ones leave
	return now, nil
}

// decodeDead decodes the dead letters of records missing (SQL tuples of
// topic, partition and offset) into into, as the pipeline decodes (the
// registry's tables claim their names), by a decoder of their own: a
// change of a table whose name another claims is no table's.
func (c *ChangelogMerger) decodeDead(ctx context.Context, tx *sql.Tx, missing []string, into map[deadKey]deadLetter) error {
	dec := c.dec.Fresh()
	for log, src := range c.snk.RoutedSources() {
		dec.Claim(log, cdc.Registered{Database: src.Database, Schema: src.Schema, Table: src.Name, Server: src.Server, Model: src.Model})
	}
	var changes []cdc.Change
	for chunk := range slices.Chunk(missing, 1000) {
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT d.topic, d."partition", d."offset", d."key", d."value" FROM %s d
	JOIN (VALUES %s) AS m(topic, "partition", "offset") USING (topic, "partition", "offset")`, c.dlq, strings.Join(chunk, ", ")))
		if err != nil {
			return fmt.Errorf("read %s: %w", c.dlq, err)
		}
		for rows.Next() {
			var k deadKey
			var key, value []byte
			if err := rows.Scan(&k.topic, &k.partition, &k.offset, &key, &value); err != nil {
				rows.Close()
				return fmt.Errorf("read %s: %w", c.dlq, err)
			}
			d := deadLetter{topic: k.topic, tables: map[string]int64{}}
			if prev, ok := into[k]; ok {
				d = prev // the record's other dead letters
			}
			changes, err = dec.Decode(changes[:0], k.topic, key, value)
			var derr *cdc.Error
			switch {
			case errors.As(err, &derr) && derr.Claimed:
				// a table whose name another holds: none of theirs
			case errors.As(err, &derr) && derr.Log != "":
				// a change of a known table that cannot be applied: that
				// table's alone
				hold(d.tables, derr.Log, derr.SourceTime)
			case err != nil:
				d.unknown = true
			default:
				for _, ch := range changes {
					if ch.Op.Letter() == 0 {
						continue
					}
					hold(d.tables, ch.Table.Log, ch.SourceTime)
				}
			}
			into[k] = d
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read %s: %w", c.dlq, err)
		}
	}
	return nil
}

// valuesQuery is the query of rows (SQL tuples) of columns ("name TYPE,
// …"), none when rows is empty.
func valuesQuery(rows []string, columns string) string {
	var names, empty []string
	for _, c := range strings.Split(columns, ", ") {
		name, typ, _ := strings.Cut(c, " ")
		names = append(names, name)
		empty = append(empty, "NULL::"+typ+" AS "+name)
	}
	if len(rows) == 0 {
		return "SELECT " + strings.Join(empty, ", ") + " WHERE false"
	}
	slices.Sort(rows)
	return "SELECT * FROM (VALUES " + strings.Join(rows, ", ") + ") AS v(" + strings.Join(names, ", ") + ")"
}

// listed are the queries of the listing of the changelog tables' topics'
// partitions, rows (topic, partition, start_offset, end_offset: start
// past the group's committed offset, if any), and of
// the heartbeats, rows (topic, t): the source time each heartbeat of the
// topic's source reached, read before the listing. The topics are read in
// tx. ok is false when m.Ends fails (logged): the round marks nothing, as
// it cannot tell the partitions with records to load.
func (c *ChangelogMerger) listed(ctx context.Context, tx *sql.Tx, m Marking, committed map[sink.TopicPartition]int64) (ends, beats string, ok bool, err error) {
	const endColumns, beatColumns = `topic VARCHAR, "partition" INTEGER, start_offset BIGINT, end_offset BIGINT`, "topic VARCHAR, t TIMESTAMP"
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT topic FROM `+c.reached+` ORDER BY topic`)
	if err != nil {
		return "", "", false, fmt.Errorf("read the topics of %s: %w", c.reached, err)
	}
	var topics []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return "", "", false, fmt.Errorf("read the topics of %s: %w", c.reached, err)
		}
		topics = append(topics, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", "", false, fmt.Errorf("read the topics of %s: %w", c.reached, err)
	}
	if m.Ends == nil || len(topics) == 0 {
		return valuesQuery(nil, endColumns), valuesQuery(nil, beatColumns), true, nil
	}
	listed, err := m.Ends(ctx, topics)
	if err != nil {
		c.mg.log.Warn("the offsets of the changelog tables' topics could not be listed; no hour is marked this round", "err", err)
		return "", "", false, nil
	}
	var endRows, beatRows []string
	seen := map[string]bool{}
	for tp, o := range listed {
		endRows = append(endRows, fmt.Sprintf("(%s, %d, %d, %d)", sqltext.String(tp.Topic), tp.Partition, max(o.Start, committed[tp]), o.End))
		seen[tp.Topic] = true
	}
	for _, t := range topics {
		if !seen[t] {
			// Not listed (deleted, or Kafka did not know it for the
			// moment): a partition of no known progress, -1, holds its
			// tables back, and its topic alone.
			endRows = append(endRows, fmt.Sprintf("(%s, -1, 0, 1)", sqltext.String(t)))
		}
	}
	for _, t := range topics {
		for _, b := range m.Beats {
			if b.Topics.MatchString(t) {
				beatRows = append(beatRows, fmt.Sprintf("(%s, make_timestamp(%d))", sqltext.String(t), b.SourceTime))
			}
		}
	}
	return valuesQuery(endRows, endColumns), valuesQuery(beatRows, beatColumns), true, nil
}

// Ready says whether table's hour (truncated to the hour) is marked:
// table is the model's name (without its schema) in any case, as DuckDB
// takes it.
func Ready(ctx context.Context, db *sql.DB, table string, hour time.Time) (bool, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+sqltext.Ident(ReadyTable)+` WHERE lower("table") = lower(?) AND hour = ?`,
		table, hour.UTC().Truncate(time.Hour)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", ReadyTable, err)
	}
	return n > 0, nil
}
