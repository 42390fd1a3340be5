package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// diffModels are merge.models whose columns meet every cast a model
// makes (numbers as strings, fractions into integers, booleans as text
// and numbers, decimals, timestamps with and without offsets, JSON, a
// dotted path key, a list element), one without a version (inserts, upserts and deletes
// decided by offset) and one with a version and a composite key.
const diffModels = `merge:
  models:
    - name: things
      key: [id]
      action: {path: $.op, delete: [delete], insert: [insert]}
      columns:
        id:     {path: $.id, type: BIGINT}
        name:   {path: $.name, type: VARCHAR}
        n:      {path: $.n, type: INTEGER}
        ok:     {path: $.ok, type: BOOLEAN}
        amt:    {path: $.amt, type: "DECIMAL(12,2)"}
        at:     {path: $.at, type: TIMESTAMP}
        score:  {path: $.score, type: DOUBLE}
        tags:   {path: $.tags, type: JSON}
        dotted: {path: $.attrs."a.b", type: VARCHAR}
        first:  {path: "$.list[1]", type: VARCHAR}
    - name: versioned
      key: [k, id]
      version: v
      action: {path: $.op, delete: [d]}
      columns:
        k:   {path: $.k, type: VARCHAR}
        id:  {path: $.id, type: BIGINT}
        v:   {path: $.v, type: BIGINT}
        val: {path: $.val, type: VARCHAR}
`

// diffModelRounds are the raw messages of each round (key, value), each
// round loaded and then merged: the second replays some of the first and
// changes keys the first merged. Both models read every message: the
// versioned model's keys (ids from 101) are upserts of things too.
var diffModelRounds = [][][2]string{{
	{"1", `{"op":"insert","id":1,"name":"a","n":"12","ok":true,"amt":"10.505","at":"2024-01-01T10:00:00+02:00","score":"1.5","tags":{"b":1,"a":[1,2,{"c":null}]},"attrs":{"a.b":"dot"},"list":[1,"second"]}`},
	{"2", `{"op":"insert","id":"2","n":2.5,"ok":"true","amt":3,"at":"2024-01-01 10:00:00","score":1e3,"tags":"text"}`},
	{"3", `{"op":"upsert","id":3,"n":"1.5","ok":false,"amt":-0.005,"at":"2024-01-01T10:00:00.123456Z","score":-2}`},
	{"4", `{"op":"upsert","id":4,"n":-1.5,"ok":"FALSE","amt":"1e2","at":"2024-01-01T10:00:00-05:30","score":"2"}`},
	{"5", `{"op":"delete","id":5}`},
	{"5", `{"op":"insert","id":5,"name":"after its delete"}`},
	{"6", `{"op":"upsert","id":6,"name":"first"}`},
	{"6", `{"op":"upsert","id":6,"name":"second"}`},
	{"6", `{"op":"insert","id":6,"name":"an insert after upserts"}`},
	{"7", `{"op":"upsert","name":"no key"}`},
	{"8", `{"op":"upsert","id":null,"name":"null key"}`},
	{"9", `{"op":"upsert","id":"abc","name":"key does not cast"}`},
	{"10", `{"op":"upsert","id":10,"n":"x","ok":"maybe","amt":"ten","at":"yesterday","score":"high"}`},
	{"11", `{"op":"upsert","id":11.4,"n":null,"ok":null,"amt":null,"at":null,"score":null,"tags":null}`},
	{"12", `{"op":"upsert","id":12,"n":2147483648,"list":[{"a":1},{"b":"\u00e9"}]}`},
	{"13", `{"op":"upsert","id":13,"ok":"yes","name":"\"quoted\" \\ back\u00e9"}`},
	{"14", `{"id":14,"name":"no op: an upsert"}`},
	{"16", `{"op":"upsert","id":16,"ok":1,"n":true,"score":true,"amt":false}`},
	{"17", `{"op":"upsert","id":17,"ok":"0","n":false}`},
	{"18", `{"op":"upsert","id":18,"ok":"t"}`},
	{"19", `{"op":"upsert","id":19,"ok":0}`},
	{"20", `{"op":"upsert","id":true,"name":"a key of true"}`},
	{"k", `{"k":"a","id":101,"v":2,"val":"newer first"}`},
	{"k", `{"k":"a","id":101,"v":1,"val":"older later"}`},
	{"k", `{"k":"a","id":102,"v":"5","val":"version as text"}`},
	{"k", `{"k":"a","id":102,"v":4.6,"val":"a fraction rounding to the same version, later"}`},
	{"k", `{"k":"b","id":101,"v":3,"op":"d"}`},
	{"k", `{"k":"b","id":101,"v":2,"val":"older than its delete"}`},
	{"k", `{"k":"c","id":101,"val":"no version"}`},
	{"k", `{"k":null,"id":101,"v":1,"val":"null key part"}`},
}, {
	// Replays and later changes.
	{"1", `{"op":"insert","id":1,"name":"a replayed insert"}`},
	{"2", `{"op":"upsert","id":2,"name":"updated","ok":"no"}`},
	{"5", `{"op":"delete","id":5}`},
	{"5", `{"op":"delete","id":5}`},
	{"5", `{"op":"insert","id":5,"name":"re-inserted"}`},
	{"5", `{"op":"insert","id":5,"name":"a second insert"}`},
	{"6", `{"op":"delete","id":6}`},
	{"3", `{"op":"delete","id":3}`},
	{"3", `{"op":"upsert","id":3,"name":"back"}`},
	{"15", `{"op":"delete","id":15}`},
	{"k", `{"k":"b","id":101,"v":2,"val":"older than its delete, replayed"}`},
	{"k", `{"k":"b","id":101,"v":"4","val":"newer than its delete"}`},
	{"k", `{"k":"a","id":101,"v":2,"val":"same version, later"}`},
	{"k", `{"k":"a","id":102,"v":1,"op":"d"}`},
}}

// The same raw messages and merge.models, merged on DuckDB and on
// Databend (its test server evaluating the merge statements as
// databend-query does), give the same model rows and the same rejects.
func TestSinksMergeModelsAlike(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline and merges twice on two sinks")
	}
	cluster, prod := startKafka(t, 2)
	srv := databendtest.New("u", "p")
	srv.Set(func() { srv.SQL = true })
	t.Cleanup(srv.Close)
	kinds := []struct{ name, sink string }{
		{"duckdb", "duckdb: {path: %[1]q}"},
		{"databend", "type: databend, databend: {dsn: %[2]q}"},
	}
	cfgs := map[string]*config.Config{}
	for _, k := range kinds {
		dir := t.TempDir()
		path := filepath.Join(dir, "tracelake.yaml")
		text := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], group: %s}\nbatch: {max_interval: 100ms}\nload: {max_interval: 100ms}\nsink: {%s}\nmetrics: {listen: \"\"}\n%s",
			cluster.ListenAddrs()[0], testTopic, "g-"+k.name, fmt.Sprintf(k.sink, filepath.Join(dir, "t.duckdb"), srv.DSN("")), diffModels)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[k.name] = cfg
	}
	for _, round := range diffModelRounds {
		var recs []*kgo.Record
		for _, m := range round {
			recs = append(recs, &kgo.Record{Topic: testTopic, Key: []byte(m[0]), Value: []byte(m[1])})
		}
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, k := range kinds {
			cfg := cfgs[k.name]
			runToIdle(t, k.name, cfg, func(mg modelMerger) {
				for _, m := range cfg.Models() {
					// Twice: the second merge finds nothing new.
					for range 2 {
						if _, err := mg.Merge(context.Background(), m); err != nil {
							t.Fatalf("%s: merge %s: %v", k.name, m.Name, err)
						}
					}
				}
			})
		}
	}

	rejectCols := []duckdbsink.Column{{Name: "topic", Type: "VARCHAR"}, {Name: "partition", Type: "INTEGER"},
		{Name: "offset", Type: "BIGINT"}, {Name: "reason", Type: "VARCHAR"}}
	db := openDuckDBFile(t, cfgs["duckdb"].Sink.DuckDB.Path)
	for _, m := range cfgs["duckdb"].Models() {
		var cols []duckdbsink.Column
		for _, c := range m.Columns {
			cols = append(cols, duckdbsink.Column{Name: c.Name, Type: c.Type})
		}
		for _, tbl := range []struct {
			name string
			cols []duckdbsink.Column
		}{{m.Target, cols}, {m.Name + "_rejects", rejectCols}} {
			want := duckRows(t, db, tbl.name, tbl.cols)
			for _, r := range want {
				for _, c := range tbl.cols {
					if c.Type == "JSON" && r[c.Name] == "null" {
						// The test server keeps its rows as JSON, where a
						// VARIANT holding JSON null and a NULL are both
						// null: compared as NULL.
						r[c.Name] = "NULL"
					}
				}
			}
			got := databendRows(t, srv, tbl.name, tbl.cols)
			if len(want) == 0 {
				t.Errorf("duckdb: no rows in %s", tbl.name)
			}
			for i := range max(len(want), len(got)) {
				var w, g map[string]string
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if fmt.Sprint(w) != fmt.Sprint(g) {
					t.Errorf("%s row %d:\n  databend: %v\n  duckdb:   %v", tbl.name, i, g, w)
				}
			}
		}
	}
}
