package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// cdcWorkload makes Debezium change events (MySQL connector, schemas off,
// one topic for every table, keyed by the row's key) over many source
// tables: inserts of new keys, updates and deletes of live ones, in one
// binary log, and keeps the state the source has after them.
type cdcWorkload struct {
	rng    *rand.Rand
	tables int
	pos    int
	// live is each table's rows: key → value.
	live []map[int]string
	next []int // each table's next new key
}

func newCDCWorkload(tables int, seed uint64) *cdcWorkload {
	w := &cdcWorkload{rng: rand.New(rand.NewPCG(seed, seed)), tables: tables, live: make([]map[int]string, tables), next: make([]int, tables)}
	for i := range w.live {
		w.live[i] = map[int]string{}
	}
	return w
}

func cdcTableName(i int) string { return fmt.Sprintf("t%04d", i) }

// record is the next change, as a record for partitions partitions (by
// key, as Debezium's producer partitions).
func (w *cdcWorkload) record(partitions int32) *kgo.Record {
	t := w.rng.IntN(w.tables)
	live := w.live[t]
	op, id := "c", w.next[t]
	if len(live) > 0 && w.rng.IntN(10) < 6 {
		// An update or a delete of a live key, picked among the first
		// keys made: the recent keys then change too.
		id = w.rng.IntN(w.next[t])
		if _, ok := live[id]; ok {
			op = "u"
			if w.rng.IntN(4) == 0 {
				op = "d"
			}
		} else {
			op, id = "c", w.next[t]
		}
	}
	if op == "c" {
		w.next[t]++
	}
	w.pos += 10
	v := fmt.Sprintf("v%d-%d", w.pos, w.rng.IntN(1000))
	row := fmt.Sprintf(`{"id":%d,"v":%q,"n":%d}`, id, v, w.pos)
	before, after := "null", row
	switch op {
	case "d":
		before, after = fmt.Sprintf(`{"id":%d,"v":%q,"n":0}`, id, live[id]), "null"
		delete(live, id)
	default:
		live[id] = v
	}
	value := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"connector":"mysql","db":"shop","table":%q,"file":"mysql-bin.000001","pos":%d,"row":0,"ts_ms":1700000000000},"op":%q,"ts_ms":1700000000000}`,
		before, after, cdcTableName(t), w.pos, op)
	key := fmt.Sprintf(`{"id":%d}`, id)
	return &kgo.Record{Topic: topic, Partition: int32((t*7919 + id) % int(partitions)), Key: []byte(key), Value: []byte(value)}
}

// Changes of 100 source tables in one topic of four partitions, every
// change once through the pipeline, then merged: each modelled table holds
// the source's rows, deletes applied — as the source database has them.
func TestCDCHundredTables(t *testing.T) {
	const tables, changes = 100, 20_000
	c := newCluster(t, 4)
	cfg := cdcConfig(t, c, "debezium")
	s := openRouted(t, cfg)
	cl := producer(t, c)
	w := newCDCWorkload(tables, 1)
	recs := make([]*kgo.Record, changes)
	for i := range recs {
		recs[i] = w.record(4)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	dec, err := cdc.NewDecoder(cfg.CDCOptions())
	must(t, err)
	cm := merge.NewChangelogMerger(merge.NewMerger(s.DB(), slog.New(slog.DiscardHandler)), s, dec)
	models, err := cm.Pending(context.Background())
	must(t, err)
	if len(models) != tables {
		t.Fatalf("%d tables pending, want %d", len(models), tables)
	}
	for _, m := range models {
		if _, err := cm.Merge(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tables {
		var want []string
		for id, v := range w.live[i] {
			want = append(want, strconv.Itoa(id)+"|"+v)
		}
		slices.Sort(want)
		got := textRows(t, s, `SELECT id::VARCHAR || '|' || v FROM cdc_shop_`+cdcTableName(i)+` ORDER BY 1`)
		if !slices.Equal(got, want) {
			t.Fatalf("table %s: %d rows, want %d (first difference among %v / %v)", cdcTableName(i), len(got), len(want), head(got), head(want))
		}
	}
}

// textRows is a query's first column of each row.
func textRows(t *testing.T, s *duckdb.Sink, q string) []string {
	t.Helper()
	rows, err := s.DB().Query(q)
	must(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		must(t, rows.Scan(&v))
		out = append(out, v)
	}
	must(t, rows.Err())
	return out
}

func head(s []string) []string { return s[:min(len(s), 3)] }
