package main

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/verify"
)

// committingFirst is a snapshot whose first query is preceded by a
// commit of the running process (commit): a load and a move between the
// start of verify and its snapshot.
type committingFirst struct {
	tx     *sql.Tx
	commit func()
}

func (c *committingFirst) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if c.commit != nil {
		c.commit()
		c.commit = nil
	}
	return c.tx.QueryContext(ctx, q, args...)
}

// Verify counted the changelog tables the registry listed when it began,
// read outside its snapshot: a table a load created and a move filled
// after that, before the snapshot, held rows of the ledger that verify
// did not count ("records of a range with no row"), and verify of a run
// that lost nothing failed. The registry is now read in the snapshot.
func TestVerifyCountsATableCreatedBeforeItsSnapshot(t *testing.T) {
	cluster, _ := startKafka(t, 1)
	cfg, err := config.FromFile(writeConfig(t, cluster, "format: debezium", ""))
	if err != nil {
		t.Fatal(err)
	}
	snk, err := openDuckDB(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	ctx := context.Background()
	if err := snk.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	dec, err := pipeline.NewChangelogDecoder(cfg.CDCOptions(), snk)
	if err != nil {
		t.Fatal(err)
	}
	load := func(offset int64, table string) {
		t.Helper()
		value := fmt.Sprintf(`{"op":"c","ts_ms":1700000000000,"source":{"connector":"mysql","db":"db","table":%q,"file":"mysql-bin.000001","pos":%d,"row":0,"ts_ms":1700000000000},"before":null,"after":{"id":1}}`, table, 100+offset)
		b := &sink.Batch{}
		n, err := dec.AppendRows(b, &kgo.Record{Topic: testTopic, Offset: offset, Key: []byte(`{"id":1}`), Value: []byte(value)})
		if err != nil {
			t.Fatal(err)
		}
		b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: testTopic}, First: offset, Last: offset, Records: int64(n)}}
		f, err := snk.Stage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := snk.Load(ctx, []sink.File{f}); err != nil {
			t.Fatal(err)
		}
		if _, err := snk.Distribute(ctx); err != nil {
			t.Fatal(err)
		}
	}
	load(0, "orders")
	tx, err := snk.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	q := &committingFirst{tx: tx, commit: func() { load(1, "users") }}
	rep, err := verifyDuckDB(ctx, cfg, snk, verify.SQLQuerier{DB: q})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Errorf("verify: %v, want it to pass", rep.Problems)
	}
	var tables int
	if err := snk.DB().QueryRow(`SELECT count(*) FROM cdc_routes`).Scan(&tables); err != nil || tables != 2 {
		t.Errorf("%d changelog tables (%v), want 2", tables, err)
	}
}
