package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Change capture under SIGKILL while the source's schema changes: a
// simulated MySQL database (shop) of three logical tables — orders, whose
// column note is added mid-stream, qty widened from INT to BIGINT and
// legacy dropped; part, sharded over part_0 and part_1 (cdc.shards), the
// shards' schemas changed one at a time (part_0's amount widened, part_1
// given tag); and items, snapshotted before its stream (op r, one
// position) and snapshotted again after deletes, its reads interleaved
// with the stream (Debezium's incremental snapshot) — sends statements
// of one to four rows, near the end now and then one whose row has an id
// that is no number. Debezium (with schemas, and without: types
// inferred, qty widened by a fraction to a decimal's text; one record per
// row, a tombstone after each delete) and Canal (one flat message per
// statement) carry it over four partitions while `tracelake run` lands,
// moves, merges and marks hours done, killed at random moments and
// restarted, the schema changes among them. After each kill verify
// passes and no done mark is ahead of its model; at the end every
// changelog table holds each change once, nothing is left landed, every
// model equals the source's state computed here from the statements
// sent, and the dead-letter table holds exactly the records of the bad
// rows (a Debezium record is one row; a Canal message's bad row takes
// its message with it); with those deleted, a merge marks hours of every
// model, none ahead of it.
func TestLongCDCKill9WithSchemaChangesSnapshotsAndShards(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("builds and runs the binary; long")
	}
	// debezium-inferred: Debezium without schemas, its types inferred
	// from the values (its qty widened by a fraction, to a decimal's text).
	for _, format := range []string{"debezium", "debezium-inferred", "canal"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
			cdcChaos(t, format)
		})
	}
}

// cdcChaos is TestLongCDCKill9WithSchemaChangesSnapshotsAndShards of
// one format.
func cdcChaos(t *testing.T, format string) {
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	kafkaFormat, _, _ := strings.Cut(format, "-")
	cfgPath := writeConfig(t, cluster, "format: "+kafkaFormat+", group: cdcchaos, session_timeout: 6s, rebalance_timeout: 6s", `workers: 2
batch: {max_records: 200, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
merge: {every: 200ms}
cdc:
  distribute_every: 100ms
  ready_delay: 0s
  shards: [{database: shop, table: "part_[0-9]+", as_table: part}]`)
	const statements = 2000
	seed := uint64(time.Now().UnixNano())
	t.Logf("source from seed %d", seed)
	src := newChaosSource(rand.New(rand.NewPCG(seed, 38)), statements, format)
	var mu sync.Mutex // sent and bad, appended to by the second half's producer
	var sent []sentChange
	var bad []string // partition/offset of each record that must be dead-lettered
	produce := func(n, per int, pause time.Duration) error {
		for done := 0; done < n; done += per {
			time.Sleep(pause) // the source's pace, so that kills fall among its schema changes
			var recs []*kgo.Record
			holds := map[*kgo.Record]chaosRecord{} // ProduceSync's results come in no set order
			for range min(per, n-done) {
				st := src.next()
				rs, hs := src.encode(format, st), src.records(format, st)
				for i, r := range rs {
					holds[r] = hs[i]
				}
				recs = append(recs, rs...)
			}
			res := prod.ProduceSync(context.Background(), recs...)
			if err := res.FirstErr(); err != nil {
				return err
			}
			mu.Lock()
			for _, pr := range res {
				rec, r := pr.Record, holds[pr.Record]
				switch {
				case r.tombstone:
				case r.bad:
					bad = append(bad, fmt.Sprintf("%d/%d", rec.Partition, rec.Offset))
				default:
					sent = append(sent, sentChange{model: "cdc_shop_" + r.logical, at: r.at, partition: rec.Partition, offset: rec.Offset})
				}
			}
			mu.Unlock()
		}
		return nil
	}
	if err := produce(statements/2, 200, 0); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- produce(statements/2, 25, 300*time.Millisecond) }()
	killAtRandomMomentsThen(t, bin, cfgPath, 5, assignedMark, func(kill int) {
		// What each kill left holds every loaded change once.
		if rep := verifyJSON(t, bin, cfgPath, 0); !rep.OK {
			t.Fatalf("verify after kill %d: %+v", kill, rep)
		}
		db, err := sql.Open("duckdb", filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		mu.Lock()
		defer mu.Unlock()
		checkMarksNotAhead(t, db, fmt.Sprintf("after kill %d", kill), sent)
	})
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	db := cdcRun(t, bin, cfgPath)
	checkMarksNotAhead(t, db, "at the end", sent)
	wantRows(t, db, `SELECT count(*) FROM cdc_landing`, "0")
	// Every change once in its changelog table, at its own coordinates.
	var logs []string
	for _, table := range chaosTables {
		logs = append(logs, `SELECT ktopic, kpartition, koffset, kindex FROM cdc_shop_`+table.name+`_log`)
	}
	wantRows(t, db, `SELECT count(*), count(DISTINCT (ktopic, kpartition, koffset, kindex)) FROM (`+strings.Join(logs, " UNION ALL ")+`)`,
		fmt.Sprintf("%d|%d", src.rows, src.rows))
	for _, table := range chaosTables {
		wantRows(t, db, `SELECT `+table.selected()+` FROM cdc_shop_`+table.name+` ORDER BY id`, src.want(table)...)
	}
	slices.Sort(bad)
	wantRows(t, db, `SELECT "partition" || '/' || "offset" FROM cdc_dlq ORDER BY 1`, bad...)
	// The bad rows' dead letters held every table's marks back (README
	// "Done marks"): once deleted, a merge marks the hours of every model,
	// none ahead of it.
	if _, err := db.Exec(`DELETE FROM cdc_dlq`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	db, err := sql.Open("duckdb", filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkMarksNotAhead(t, db, "after the dead letters' delete", sent)
	wantRows(t, db, `SELECT "table", count(*) > 0 FROM tracelake_ready GROUP BY ALL ORDER BY 1`,
		"cdc_shop_items|true", "cdc_shop_orders|true", "cdc_shop_part|true")
}

// chaosTable is a logical table of the simulated source and the columns
// it ever has, in order.
type chaosTable struct {
	name    string
	columns []string
	shards  int // physical tables part_0…; 0: the table itself
}

var chaosTables = []chaosTable{
	{name: "orders", columns: []string{"id", "v", "qty", "note", "legacy"}},
	{name: "part", columns: []string{"id", "v", "amount", "tag"}, shards: 2},
	{name: "items", columns: []string{"id", "v"}},
}

// selected is the select list of the model's source columns, as text.
func (c chaosTable) selected() string {
	var cols []string
	for _, col := range c.columns {
		cols = append(cols, col+"::VARCHAR")
	}
	return strings.Join(cols, ", ")
}

// chaosChange is one row changed by a statement of the simulated source.
type chaosChange struct {
	table, logical string // physical and logical table
	op             byte   // c, u, d, r
	id             int
	row, before    map[string]*string // after (the deleted row for d); before an update
	pos            int                // binlog position, shared by a statement's rows
	at             time.Time
	bad            bool // id is no number: dead-lettered
}

// chaosSource simulates the source database: it makes statements and
// keeps the state the models must end in.
type chaosSource struct {
	rng        *rand.Rand
	n, step    int
	pos, batch int
	base       time.Time
	snapshots  bool // Debezium's; Canal has none
	schemas    bool // Debezium's with schemas; without, qty's widening is a fraction
	// The schema changes of orders, by step.
	noteAt, wideAt, dropAt, resnapshotAt int
	badFrom                              int                                   // the first step that may send a bad row
	state                                map[string]map[int]map[string]*string // logical table → id → row
	resnapshotted                        bool
	reads                                []int // items' keys the re-snapshot has still to read
	fresh                                int   // ids of the bad statements' rows, never changed again
	rows                                 int   // changelog rows the good records make
}

const chaosKeys = 30

func newChaosSource(rng *rand.Rand, n int, format string) *chaosSource {
	s := &chaosSource{rng: rng, n: n, snapshots: format != "canal", schemas: format != "debezium-inferred", pos: 1000, fresh: 1000,
		base:   time.Now().UTC().Truncate(time.Hour).Add(-12 * time.Hour),
		noteAt: n * 55 / 100, badFrom: n * 92 / 100, wideAt: n * 65 / 100, dropAt: n * 75 / 100, resnapshotAt: n * 60 / 100,
		state: map[string]map[int]map[string]*string{}}
	for _, t := range chaosTables {
		s.state[t.name] = map[int]map[string]*string{}
	}
	return s
}

func str(format string, a ...any) *string { s := fmt.Sprintf(format, a...); return &s }

// rowOf is a new row of key id of table as the source's schema has it now.
func (s *chaosSource) rowOf(logical string, id int) map[string]*string {
	row := map[string]*string{"id": str("%d", id), "v": str("v%d_%d", s.pos, id)}
	switch logical {
	case "orders":
		if s.step >= s.wideAt {
			row["qty"] = str("%d", 3_000_000_000+s.rng.IntN(1000)) // beyond INT
			if !s.schemas {
				row["qty"] = str("%d.5", s.rng.IntN(1000)) // an inferred BIGINT becomes a decimal's text
			}
		} else {
			row["qty"] = str("%d", s.rng.IntN(1000))
		}
		if s.step >= s.noteAt && s.rng.IntN(4) > 0 {
			row["note"] = str("n%d", s.pos)
		} else if s.step >= s.noteAt {
			row["note"] = nil
		}
		if s.step < s.dropAt {
			row["legacy"] = str("L%d", s.pos)
		}
	case "part":
		// The shards' schemas change one at a time, as an ALTER run
		// shard by shard does: part_0's amount is widened, part_1 gains
		// tag.
		row["amount"] = str("%d", s.rng.IntN(100000))
		if id%2 == 0 && s.step >= s.wideAt {
			row["amount"] = str("%d", 5_000_000_000+s.rng.IntN(1000))
		}
		if id%2 == 1 && s.step >= s.noteAt {
			row["tag"] = str("t%d", s.pos)
		}
	}
	return row
}

// next makes the source's next statement: its rows, not yet applied to
// the state (records does, for the good ones).
func (s *chaosSource) next() []chaosChange {
	defer func() { s.step++ }()
	s.pos += 10
	at := s.base.Add(time.Duration(s.step) * 20 * time.Second)
	one := func(logical, table string, op byte, id int) chaosChange {
		c := chaosChange{table: table, logical: logical, op: op, id: id, pos: s.pos, at: at}
		old := s.state[logical][id]
		switch op {
		case 'd':
			c.row = old
		case 'r':
			c.row = old
		default:
			c.row, c.before = s.rowOf(logical, id), old
		}
		return c
	}
	switch {
	case s.step == 0 && s.snapshots:
		// The snapshot of items before its stream: every row it has, at
		// one position.
		var st []chaosChange
		for id := range chaosKeys / 2 {
			s.state["items"][id] = s.rowOf("items", id)
			st = append(st, one("items", "items", 'r', id))
		}
		return st
	case s.snapshots && s.step >= s.resnapshotAt && !s.resnapshotted:
		s.resnapshotted = true
		// items snapshotted again (its deletes before it among the
		// statements so far): its reads come one by one between the
		// other statements, each the row as it is then.
		for id := range chaosKeys {
			if s.state["items"][id] != nil {
				s.reads = append(s.reads, id)
			}
		}
	case len(s.reads) > 0 && s.rng.IntN(2) == 0:
		id := s.reads[0]
		s.reads = s.reads[1:]
		if s.state["items"][id] != nil {
			return []chaosChange{one("items", "items", 'r', id)}
		}
	case s.step >= s.badFrom && s.rng.IntN(10) == 0:
		// An insert of three new rows of orders, the middle one's id no
		// number. Only near the stream's end: such a dead letter holds
		// back the marks of every table of its topic (README "Done
		// marks"), and the marks of the hours before it are to be checked.
		var st []chaosChange
		for i := range 3 {
			s.fresh++
			c := one("orders", "orders", 'c', s.fresh)
			c.bad = i == 1
			if c.bad {
				c.row["id"] = str("many") // a key of numbers that would be text
			}
			st = append(st, c)
		}
		return st
	}
	for {
		t := chaosTables[[]int{0, 0, 0, 1, 1, 2}[s.rng.IntN(6)]]
		table, shard := t.name, 0
		if t.shards > 0 {
			shard = s.rng.IntN(t.shards)
			table = fmt.Sprintf("%s_%d", t.name, shard)
		}
		op := []byte{'c', 'u', 'u', 'd'}[s.rng.IntN(4)]
		var ids []int
		for _, id := range s.rng.Perm(chaosKeys) {
			if t.shards > 0 && id%t.shards != shard { // the key is unique across the shards
				continue
			}
			if (s.state[t.name][id] != nil) == (op != 'c') && len(ids) < 1+s.rng.IntN(4) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			continue // no row for op: another draw
		}
		slices.Sort(ids)
		var st []chaosChange
		for _, id := range ids {
			st = append(st, one(t.name, table, op, id))
		}
		return st
	}
}

// chaosRecord is what a record of a statement holds.
type chaosRecord struct {
	logical   string
	at        time.Time
	tombstone bool
	bad       bool
}

// records applies st to the state as the models take it from format's
// records (a bad row alone in Debezium, its whole message in Canal, is
// dead-lettered and changes nothing), and says what each record holds, in
// the order encode makes them.
func (s *chaosSource) records(format string, st []chaosChange) []chaosRecord {
	var out []chaosRecord
	badMessage := format == "canal" && slices.ContainsFunc(st, func(c chaosChange) bool { return c.bad })
	for _, c := range st {
		good := !c.bad && !badMessage
		if good {
			if c.op == 'd' {
				delete(s.state[c.logical], c.id)
			} else {
				s.state[c.logical][c.id] = c.row
			}
			s.rows++
		}
		if format != "canal" {
			out = append(out, chaosRecord{logical: c.logical, at: c.at, bad: c.bad})
			if c.op == 'd' {
				out = append(out, chaosRecord{logical: c.logical, at: c.at, tombstone: true})
			}
		}
	}
	if format == "canal" {
		out = append(out, chaosRecord{logical: st[0].logical, at: st[0].at, bad: badMessage})
	}
	return out
}

// want is the model's rows of table as the source holds them: each key's
// row of its last change, a column it lacked NULL, or its default where
// the changes say it (note's, in Debezium's schemas).
func (s *chaosSource) want(t chaosTable) []string {
	var out []string
	for id := range s.fresh + 1 {
		row := s.state[t.name][id]
		if row == nil {
			continue
		}
		var vals []string
		for _, col := range t.columns {
			v, ok := row[col]
			switch {
			case v != nil:
				vals = append(vals, *v)
			case !ok && col == "note" && s.schemas && s.snapshots: // Debezium with schemas
				vals = append(vals, "d")
			default:
				vals = append(vals, "")
			}
		}
		out = append(out, strings.Join(vals, "|"))
	}
	return out
}

// encode makes st's records in format.
func (s *chaosSource) encode(format string, st []chaosChange) []*kgo.Record {
	if format == "canal" {
		return []*kgo.Record{s.canal(st)}
	}
	var recs []*kgo.Record
	for i, c := range st {
		key := fmt.Appendf(nil, `{"id":%d}`, c.id)
		recs = append(recs, &kgo.Record{Topic: testTopic, Key: key, Value: s.debezium(c, i)})
		if c.op == 'd' {
			recs = append(recs, &kgo.Record{Topic: testTopic, Key: key}) // its tombstone
		}
	}
	return recs
}

// schemaColumns are the Kafka Connect types of the columns a row of
// logical holds, as the source's schema has them at c.
func (s *chaosSource) schemaColumns(c chaosChange) []map[string]any {
	cols := []map[string]any{{"field": "id", "type": "int64", "optional": false}, {"field": "v", "type": "string", "optional": true}}
	switch c.logical {
	case "orders":
		qty := "int32"
		if s.step > s.wideAt { // encode follows next, which counted c's step
			qty = "int64"
		}
		cols = append(cols, map[string]any{"field": "qty", "type": qty, "optional": true})
		if _, ok := c.row["note"]; ok || s.step > s.noteAt {
			// ADD COLUMN note … DEFAULT 'd': the source's rows from before
			// it read 'd' (the schema says so only with schemas).
			cols = append(cols, map[string]any{"field": "note", "type": "string", "optional": true, "default": "d"})
		}
		if s.step <= s.dropAt {
			cols = append(cols, map[string]any{"field": "legacy", "type": "string", "optional": true})
		}
	case "part":
		amount := "int32"
		if c.id%2 == 0 && s.step > s.wideAt {
			amount = "int64"
		}
		cols = append(cols, map[string]any{"field": "amount", "type": amount, "optional": true})
		if c.id%2 == 1 && s.step > s.noteAt {
			cols = append(cols, map[string]any{"field": "tag", "type": "string", "optional": true})
		}
	}
	return cols
}

// debezium is the value of the MySQL connector's change c, the i-th row
// of its statement, with its schema unless s.schemas is off.
func (s *chaosSource) debezium(c chaosChange, i int) []byte {
	cols := s.schemaColumns(c)
	row := func(r map[string]*string) any {
		if r == nil {
			return nil
		}
		out := map[string]any{}
		for _, col := range cols {
			name := col["field"].(string)
			v, ok := r[name]
			switch {
			case !ok || v == nil:
				out[name] = nil
			case col["type"] == "string" || c.bad && name == "id":
				out[name] = *v
			default:
				out[name] = json.RawMessage(*v)
			}
		}
		return out
	}
	var before, after any
	switch c.op {
	case 'd':
		before = row(c.row)
	case 'u':
		before, after = row(c.before), row(c.row)
	default:
		after = row(c.row)
	}
	rowSchema := func(field string) map[string]any {
		return map[string]any{"type": "struct", "fields": cols, "optional": true, "name": "dbserver1.shop." + c.table + ".Value", "field": field}
	}
	snapshot := "false"
	if c.op == 'r' {
		snapshot = "true"
	}
	payload := map[string]any{"before": before, "after": after, "op": string(c.op), "ts_ms": c.at.UnixMilli(),
		"source": map[string]any{"connector": "mysql", "db": "shop", "table": c.table, "file": "mysql-bin.000001", "pos": c.pos, "row": i,
			"ts_ms": c.at.UnixMilli(), "snapshot": snapshot}}
	if !s.schemas {
		v, err := json.Marshal(payload)
		if err != nil {
			panic(err) // BUG: the maps above always marshal
		}
		return v
	}
	v, err := json.Marshal(map[string]any{
		"schema": map[string]any{"type": "struct", "optional": false, "name": "dbserver1.shop." + c.table + ".Envelope", "fields": []any{
			rowSchema("before"), rowSchema("after"),
			map[string]any{"type": "struct", "optional": false, "name": "io.debezium.connector.mysql.Source", "field": "source", "fields": []any{
				map[string]any{"type": "string", "optional": false, "field": "connector"},
				map[string]any{"type": "string", "optional": false, "field": "db"},
				map[string]any{"type": "string", "optional": true, "field": "table"},
				map[string]any{"type": "string", "optional": false, "field": "file"},
				map[string]any{"type": "int64", "optional": false, "field": "pos"},
				map[string]any{"type": "int32", "optional": false, "field": "row"},
				map[string]any{"type": "int64", "optional": false, "field": "ts_ms"},
				map[string]any{"type": "string", "optional": true, "field": "snapshot"},
			}},
			map[string]any{"type": "string", "optional": false, "field": "op"},
			map[string]any{"type": "int64", "optional": true, "field": "ts_ms"},
		}},
		"payload": payload,
	})
	if err != nil {
		panic(err) // BUG: the maps above always marshal
	}
	return v
}

// canal is Canal's flat message of statement st, keyed by its table
// (canal.mq.partitionHash by table: a table's messages in order).
func (s *chaosSource) canal(st []chaosChange) *kgo.Record {
	c := st[0]
	types := map[string]string{"id": "bigint(20)", "v": "varchar(40)"}
	for _, col := range s.schemaColumns(c) {
		switch name := col["field"].(string); {
		case col["type"] == "int64":
			types[name] = "bigint(20)"
		case col["type"] == "int32":
			types[name] = "int(11)"
		case name != "id" && name != "v":
			types[name] = "varchar(40)"
		}
	}
	var data, old []map[string]*string
	for _, ch := range st {
		row := map[string]*string{}
		for name := range types {
			row[name] = ch.row[name]
		}
		data = append(data, row)
		if ch.op == 'u' {
			old = append(old, map[string]*string{"v": ch.before["v"]})
		}
	}
	typ := map[byte]string{'c': "INSERT", 'r': "INSERT", 'u': "UPDATE", 'd': "DELETE"}[c.op]
	s.batch++
	v, err := json.Marshal(map[string]any{"data": data, "old": old, "database": "shop", "table": c.table, "type": typ, "isDdl": false,
		"es": c.at.UnixMilli(), "ts": c.at.UnixMilli() + 5, "id": s.batch, "mysqlType": types, "pkNames": []string{"id"}})
	if err != nil {
		panic(err) // BUG: the maps above always marshal
	}
	return &kgo.Record{Topic: testTopic, Key: []byte(c.table), Value: v}
}
