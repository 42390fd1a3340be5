package merge

import (
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A source column added with a default holding a NUL character (MySQL's
// CHAR(1) NOT NULL DEFAULT '\0', which Debezium writes "\u0000") gives
// the changelog table that default: the rows from before the column read
// it, whether the table is made with the column or it is added later.
// Since 831a3145 the default is a literal of its text, CAST('…' AS
// VARCHAR), and DuckDB's parser ends the statement's text at the NUL
// ("unterminated quoted string"): the table's load fails at every retry.
func TestChangelogColumnDefaultWithANulCharacter(t *testing.T) {
	for _, made := range []string{"added", "created"} {
		t.Run(made, func(t *testing.T) {
			var opt duckdb.Options
			l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
			fs := []fld{{"id", "int32", "", ""}, {"v", "string", "", ""}}
			k, v := dbzEvent("items", "c", "mysql-bin.000001", 100, fs, "null", `{"id":1,"v":"a"}`, fs[:1], `{"id":1}`)
			l.rawKey(0, "s.db.items", k, v)
			if made == "added" {
				l.flush()
				l.mustMerge()
			}
			grown := append(fs, fld{"flag", "string", "", ""})
			k, v = dbzEvent("items", "c", "mysql-bin.000001", 300, grown, "null", `{"id":2,"v":"b","flag":"y"}`, fs[:1], `{"id":2}`)
			v = strings.ReplaceAll(v, `{"field":"flag","type":"string","optional":true`, `{"field":"flag","type":"string","optional":true,"default":"\u0000"`)
			l.rawKey(0, "s.db.items", k, v)
			l.flush()
			// Killed -9 right after the load: DuckDB replays no function
			// in a default an ALTER gave, so the sink checkpointed the
			// load that gave one (else the database no longer opens).
			opt.Path = killedCopy(t, opt.Path)
			l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium}) // fails the test if it cannot open
			l.mustMerge()
			l.want(`SELECT id, v, coalesce(replace(flag, chr(0), '<NUL>'), 'NULL') FROM cdc_db_items ORDER BY id`, "1|a|<NUL>", "2|b|y")
		})
	}
}
