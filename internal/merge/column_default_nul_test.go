package merge

import (
	"testing"
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
			// Killed -9 right after the load: DuckDB replays no function
			// in a default an ALTER gave, so the sink checkpointed the
			// load that gave one (else the database no longer opens).
			l := grownWithDefaults(t, made, []fld{{"flag", "string", "", ""}}, `{"id":2,"v":"b","flag":"y"}`, map[string]string{"flag": `"\u0000"`})
			l.want(`SELECT id, v, coalesce(replace(flag, chr(0), '<NUL>'), 'NULL') FROM cdc_db_items ORDER BY id`, "1|a|<NUL>", "2|b|y")
		})
	}
}
