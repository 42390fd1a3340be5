package merge

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A changelog table dropped by hand keeps its changes landed until it is
// there again (README "Land, then move"), and the registry holds one row
// per changelog table, which verify counts the rows of. After a restart
// the sink's cache of tables, read from the catalog, no longer had the
// dropped table: the next load of its changes took it for a new table,
// created it anew with that load's columns and registered it a second
// time, so verify counted every row of it twice ("stored more than once")
// and the round listed its model twice. Now a registered table is never
// created or registered again: its changes stay landed, as before the
// restart, and move once it is mended.
func TestChangelogTableDroppedByHandIsNotRegisteredAgainAfterARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) {
		o.Path, o.StageDir = filepath.Join(dir, "c.duckdb"), filepath.Join(dir, "stage")
		opt = *o
	})
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	if _, err := l.s.Load(ctx, l.stage()); err != nil {
		t.Fatal(err)
	}
	// Dropped before its first move: no row of it is lost by the drop.
	if _, err := l.s.DB().Exec(`DROP TABLE cdc_db_orders_log`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Distribute(ctx); err == nil || !strings.Contains(err.Error(), "cdc_db_orders_log") {
		t.Errorf("the move before the restart: %v", err)
	}
	opt.DistributeEvery = time.Nanosecond // from here, each load moves, and a table that failed is tried again at the next move
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
	l.change(0, "orders", "c", 102, row(2, "b"), "id")
	l.change(0, "users", "c", 103, row(2, "v"), "id")
	if _, err := l.s.Load(ctx, l.stage()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Distribute(ctx); err == nil || !strings.Contains(err.Error(), "cdc_db_orders_log") {
		t.Errorf("the move after the restart: %v", err)
	}
	l.want(`SELECT log_table, count(*) FROM cdc_routes GROUP BY ALL ORDER BY ALL`, "cdc_db_orders_log|1", "cdc_db_users_log|1")
	l.want(`SELECT log_table, count(*) FROM cdc_landing GROUP BY ALL`, "cdc_db_orders_log|2")
	l.want(`SELECT id, v FROM cdc_db_users_log ORDER BY id`, "1|u", "2|v")
	// Mended (made again as it was), its changes move, once each among
	// the rows verify counts, and its model holds them.
	if _, err := l.s.DB().Exec(`CREATE TABLE cdc_db_orders_log AS SELECT * FROM cdc_db_users_log WHERE false`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Distribute(ctx); err != nil {
		t.Errorf("the move once mended: %v", err)
	}
	rows, err := l.s.RoutedRows(ctx, l.s.DB())
	if err != nil {
		t.Fatal(err)
	}
	l.want(`SELECT koffset, count(*) FROM `+rows+` GROUP BY ALL ORDER BY ALL`, "0|1", "1|1", "2|1", "3|1")
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a", "2|b")
}
