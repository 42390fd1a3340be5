package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// cdcMerges is a DuckDB sink with changelog tables (kafka.format
// debezium, sink.table cdc) and a loader of Debezium changes (schemas
// off) into it, one load per call, as a run does.
type cdcMerges struct {
	t    *testing.T
	cfg  *config.Config
	snk  *duckdb.Sink
	dec  *pipeline.ChangelogDecoder
	next int64
	// extra, when set, adds columns to each change's row.
	extra func(id int, row map[string]any)
}

func newCDCMerges(t *testing.T, concurrency int) *cdcMerges {
	t.Helper()
	cfg := config.Default()
	cfg.Kafka.Format = config.FormatDebezium
	cfg.Sink.Table = "cdc"
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "c.duckdb")
	cfg.Merge.Concurrency = concurrency
	snk := openPrepared(t, cfg)
	dec, err := pipeline.NewChangelogDecoder(cfg.CDCOptions(), snk)
	if err != nil {
		t.Fatal(err)
	}
	return &cdcMerges{t: t, cfg: cfg, snk: snk, dec: dec}
}

// load loads one change per table of tables (db.<table>, insert of
// row id), keyed by id unless the table's name starts with "nokey".
func (r *cdcMerges) load(id int, tables ...string) {
	r.t.Helper()
	b := &sink.Batch{}
	first := r.next
	var rows int64
	for _, table := range tables {
		after := map[string]any{"id": id, "v": fmt.Sprintf("%s-%d", table, id)}
		if r.extra != nil {
			r.extra(id, after)
		}
		v, _ := json.Marshal(map[string]any{"op": "c", "ts_ms": 1700000000000, "before": nil, "after": after,
			"source": map[string]any{"connector": "mysql", "db": "db", "table": table, "file": "mysql-bin.000001", "pos": 100 + r.next, "row": 0, "ts_ms": 1700000000000}})
		var key []byte
		if !strings.HasPrefix(table, "nokey") {
			key, _ = json.Marshal(map[string]any{"id": id})
		}
		n, err := r.dec.AppendRows(b, &kgo.Record{Topic: "dbserver1", Partition: 0, Offset: r.next, Key: key, Value: v})
		if err != nil {
			r.t.Fatal(err)
		}
		rows += int64(n)
		r.next++
	}
	b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "dbserver1", Partition: 0}, First: first, Last: r.next - 1, Records: rows}}
	ctx := context.Background()
	f, err := r.snk.Stage(ctx, b)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.snk.Load(ctx, []sink.File{f}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *cdcMerges) job() mergeJob {
	r.t.Helper()
	job, err := changelogJob(r.cfg, merge.NewMerger(r.snk.DB(), slog.New(slog.DiscardHandler)), r.snk, markSources{})
	if err != nil {
		r.t.Fatal(err)
	}
	return job
}

// One model that cannot merge (a changelog table without a primary key,
// which sorts first here) fails alone: the models merged beside it
// (merge.concurrency) do not conflict on the tables every merge writes,
// which exist before the round whatever that first merge does.
func TestCDCFailingModelFailsAlone(t *testing.T) {
	for attempt := range 5 {
		r := newCDCMerges(t, 0) // merge.concurrency's default, 2
		r.load(1, "nokey_a", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8")
		job := r.job()
		models, err := job.current(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(models) != 9 || models[0].Name != "cdc_db_nokey_a" {
			t.Fatalf("models %v, want cdc_db_nokey_a first of 9", models)
		}
		var mu sync.Mutex
		var merged []string
		err = mergeAll(context.Background(), job, models, func(res merge.Result) {
			mu.Lock()
			merged = append(merged, res.Model)
			mu.Unlock()
		})
		if err == nil {
			t.Fatal("the table without a primary key merged")
		}
		var others []string
		for _, e := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(e, "cdc_db_nokey_a") {
				others = append(others, e)
			}
		}
		if len(others) > 0 {
			t.Fatalf("attempt %d: the table without a primary key made %d other tables fail:\n%s", attempt, len(others), strings.Join(others, "\n"))
		}
	}
}

// cancelingMerger merges every model, and cancels the run's context
// once it has merged the model named at (a SIGINT arriving then).
type cancelingMerger struct {
	at     string
	cancel context.CancelFunc
	mu     sync.Mutex
	merged []string
}

func (c *cancelingMerger) Merge(ctx context.Context, m config.Model) (merge.Result, error) {
	if err := ctx.Err(); err != nil {
		return merge.Result{}, err
	}
	c.mu.Lock()
	c.merged = append(c.merged, m.Name)
	c.mu.Unlock()
	if m.Name == c.at {
		c.cancel()
	}
	return merge.Result{Model: m.Name}, nil
}

// `tracelake merge` stopped (a signal) between two merges exits non-zero:
// the models not merged are an error, whether merges run one at a time
// or side by side.
func TestMergeStoppedBetweenModelsFails(t *testing.T) {
	for _, n := range []int{0, 2} {
		ctx, cancel := context.WithCancel(context.Background())
		mg := &cancelingMerger{at: "a", cancel: cancel}
		models := []config.Model{{Name: "a"}, {Name: "b"}, {Name: "c"}}
		// As cmdMerge runs merge.models once (no --every).
		err := mergeLoop(ctx, mergeJob{merger: mg, models: models, concurrency: n}, 0)
		cancel()
		if len(mg.merged) < len(models) && err == nil {
			t.Errorf("concurrency %d: merged %v of a, b, c and mergeLoop returned nil: tracelake merge exits 0 with models unmerged", n, mg.merged)
		}
	}
}

// `dlq replay` with change capture and nothing dead-lettered replays
// nothing and says so (it used to refuse change capture).
func TestDLQReplayOfNoChanges(t *testing.T) {
	cluster, _ := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: debezium", "")
	if code := run([]string{"dlq", "replay", "--config", cfgPath}); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}
