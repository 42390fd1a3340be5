package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A model's changes on Databend, their JSON drifting (a key as 1 and
// "1", keys and versions past 2^53, a balance turning into text or an
// object, null and empty keys, versions going back or tying within a
// partition), merged in rounds cut at random points, give the target and
// rejects of the same model merged once over every row, as on DuckDB
// (merge TestModelMergedInRoundsEqualsRebuild).
func TestModelMergedInRoundsOnDatabendEqualsOneMerge(t *testing.T) {
	for _, mode := range []struct {
		name                    string
		versioned, ties, across bool
	}{{"version", true, false, true}, {"version_ties", true, true, false}, {"no_version", false, false, false}} {
		for seed := range 3 {
			t.Run(fmt.Sprint(mode.name, "/", seed), func(t *testing.T) {
				databendRounds(t, uint64(seed), mode.versioned, mode.ties, mode.across)
			})
		}
	}
}

func databendRounds(t *testing.T, seed uint64, versioned, ties, across bool) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 13))
	model := func(name string) config.Model {
		m := config.Model{Name: name, Target: name, Source: "trace_raw", Format: config.FormatJSON, Key: []string{"id"},
			Action: config.Action{Path: "$.action", Delete: []string{"delete"}, Insert: []string{"insert"}},
			Columns: config.Columns{{Name: "id", Path: "$.id", Type: "BIGINT"}, {Name: "name", Path: "$.name", Type: "VARCHAR"},
				{Name: "balance", Path: "$.balance", Type: "DECIMAL(18,2)"}, {Name: "version", Path: "$.v", Type: "BIGINT"}}}
		if versioned {
			m.Version = "version"
		}
		return m
	}
	rounds, once := model("rounds"), model("once")
	mg := merge.NewDatabendMerger(s, false)
	ids := []string{`1`, `"1"`, `9007199254740993`, `"9007199254740992"`, `null`, `""`}
	partitionOf := map[string]int{`1`: 0, `"1"`: 0, `9007199254740993`: 1, `"9007199254740992"`: 2}
	balances := []string{`1`, `"2.5"`, `{"amount":3}`, `"lots"`}
	next := map[int]int{}
	n := 0
	for range 20 {
		for range rng.IntN(5) {
			id := ids[rng.IntN(len(ids))]
			p := rng.IntN(3)
			if k, ok := partitionOf[id]; ok && !across {
				p = k
			}
			v := int64(1<<60 + rng.IntN(1_000_000))
			if ties {
				v = 1<<60 + int64(rng.IntN(4))
			}
			doc := fmt.Sprintf(`{"action":%q,"id":%s,"v":%d,"name":"p%d-o%d","balance":%s}`,
				[]string{"update", "delete", "insert"}[rng.IntN(3)], id, v, p, next[p], balances[rng.IntN(len(balances))])
			srv.AppendRow("trace_raw", databendtest.Row{"uuid": json.RawMessage(fmt.Sprintf(`"u%d"`, n)), "koffset": json.RawMessage(fmt.Sprint(next[p])),
				"kpartition": json.RawMessage(fmt.Sprint(p)), "raw_data": json.RawMessage(doc), "record_metadata": json.RawMessage(`{"topic": "t"}`)})
			next[p]++
			n++
		}
		if rng.IntN(3) == 0 {
			if _, err := mg.Merge(ctx, rounds); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range []config.Model{rounds, once} {
		if _, err := mg.Merge(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	text := func(table string, cols ...string) []string {
		var out []string
		for _, r := range srv.Rows(table) {
			var f []string
			for _, c := range cols {
				f = append(f, string(r[c]))
			}
			out = append(out, strings.Join(f, "|"))
		}
		slices.Sort(out)
		return out
	}
	if got, want := text("rounds", "id", "name", "balance", "version"), text("once", "id", "name", "balance", "version"); !slices.Equal(got, want) {
		t.Errorf("target merged in rounds %q, merged once %q", got, want)
	}
	if got, want := text("rounds_rejects", "partition", "offset", "reason"), text("once_rejects", "partition", "offset", "reason"); !slices.Equal(got, want) {
		t.Errorf("rejects merged in rounds %q, merged once %q", got, want)
	}
}
