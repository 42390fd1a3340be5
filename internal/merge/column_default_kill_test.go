package merge

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A changelog table given a column's default (Debezium's schema says the
// source added it with one), whether it gets the column when it is made
// or added later, opens again after a kill -9 that left the load's
// transaction in the write-ahead log, and its rows from before the
// column read the default. Found by the change capture kill -9 hunt
// (TestLongCDCKill9WithSchemaChangesSnapshotsAndShards): the default was
// an expression (json_transform of the value), which DuckDB's replay of
// the log fails to bind ("Failure while replaying WAL file … no default
// database set"), so that every later open of the database failed: run,
// verify and every other command, until the log was removed by hand.
func TestChangelogColumnDefaultOpensAfterAKill(t *testing.T) {
	for _, made := range []string{"added", "created"} {
		t.Run(made, func(t *testing.T) {
			l := grownWithDefaults(t, made, []fld{{"qty", "int64", "", ""}, {"note", "string", "", ""}},
				`{"id":2,"v":"b","qty":null,"note":null}`, map[string]string{"qty": "1", "note": `"d"`})
			l.want(`SELECT id, v, coalesce(qty::VARCHAR, 'NULL'), coalesce(note, 'NULL') FROM cdc_db_items ORDER BY id`, "1|a|1|d", "2|b|NULL|NULL")
		})
	}
}

// grownWithDefaults loads a change of items (id, v), then one (id 2,
// after) whose schema adds the columns added, with the JSON defaults
// Debezium's schema gives them: the table made with them ("created") or
// given them by that later load ("added": the first change merged and
// checkpointed before, as a run's close does, so that the log holds the
// ALTER's load alone). It reopens the database as a kill -9 right after
// the second load leaves it (failing the test if it cannot open) and
// merges.
func grownWithDefaults(t *testing.T, made string, added []fld, after string, defaults map[string]string) *changeLoader {
	t.Helper()
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
	fs := []fld{{"id", "int32", "", ""}, {"v", "string", "", ""}}
	k, v := dbzEvent("items", "c", "mysql-bin.000001", 100, fs, "null", `{"id":1,"v":"a"}`, fs[:1], `{"id":1}`)
	l.rawKey(0, "s.db.items", k, v)
	if made == "added" {
		l.flush()
		l.mustMerge()
		if _, err := l.s.DB().Exec(`CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
	}
	k, v = dbzEvent("items", "c", "mysql-bin.000001", 300, append(fs, added...), "null", after, fs[:1], `{"id":2}`)
	for _, f := range added {
		if d, ok := defaults[f.name]; ok {
			v = strings.ReplaceAll(v, f.json(), strings.TrimSuffix(f.json(), "}")+`,"default":`+d+"}")
		}
	}
	l.rawKey(0, "s.db.items", k, v)
	l.flush()
	opt.Path = killedCopy(t, opt.Path)
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
	l.mustMerge()
	return l
}

// killedCopy copies the database at path, and its write-ahead log if it
// has one, as a kill -9 leaves them, to a new path it returns.
func killedCopy(t *testing.T, path string) string {
	t.Helper()
	killed := filepath.Join(t.TempDir(), "killed.duckdb")
	for _, ext := range []string{"", ".wal"} {
		b, err := os.ReadFile(path + ext)
		if errors.Is(err, fs.ErrNotExist) && ext != "" {
			continue // checkpointed: no log
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(killed+ext, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return killed
}
