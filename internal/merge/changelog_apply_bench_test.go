package merge

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkChangelogApply measures the last step of a changelog merge,
// applying the latest change per key (tl_clatest) to a model of a
// million rows, in the two shapes issue 38 names: the seed's (delete the
// model's rows of the changed keys — an anti-join — then insert the
// latest of each that is not a delete), which ChangelogMerger.step runs,
// and one MERGE INTO (delete on a matched delete, update on another
// match, insert when not matched). 10,000 changes: 70% updates of rows
// the model has, 20% inserts, 10% deletes. Each operation runs in a
// transaction rolled back, so every one starts from the same model, and
// the two shapes are checked to leave the same rows.
func BenchmarkChangelogApply(b *testing.B) {
	const rows, changes = 1_000_000, 10_000
	db, err := sql.Open("duckdb", filepath.Join(b.TempDir(), "apply.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	const cols = "id BIGINT, name VARCHAR, qty INTEGER, price DECIMAL(10,2), note VARCHAR, cdc_position VARCHAR, cdc_source_time TIMESTAMP"
	for _, q := range []string{
		"CREATE TABLE model (" + cols + ")",
		fmt.Sprintf(`INSERT INTO model SELECT i, 'name ' || i, i %% 100, (i %% 10000) / 100, repeat('n', 40), lpad(i::VARCHAR, 12, '0'), TIMESTAMP '2026-12-01' + INTERVAL (i) SECOND FROM range(%d) t(i)`, rows),
		"CREATE TABLE latest (" + cols + ", cdc_op VARCHAR)",
		// Keys spread over the model (updates and deletes) and past it
		// (inserts), in no order.
		fmt.Sprintf(`INSERT INTO latest SELECT CASE WHEN j %% 10 < 2 THEN %d + j ELSE (j * 7919) %% %d END, 'new ' || j, j %% 50, 1.25, repeat('m', 40),
			lpad((%d + j)::VARCHAR, 12, '0'), TIMESTAMP '2026-12-03', CASE WHEN j %% 10 = 9 THEN 'd' WHEN j %% 10 < 2 THEN 'c' ELSE 'u' END FROM range(%d) t(j)`,
			rows, rows, rows, changes),
		"CHECKPOINT",
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	const set = "name = x.name, qty = x.qty, price = x.price, note = x.note, cdc_position = x.cdc_position, cdc_source_time = x.cdc_source_time"
	shapes := []struct {
		name  string
		stmts []string
	}{
		{"anti_join_insert", []string{
			`DELETE FROM model t USING latest x WHERE t.id = x.id`,
			`INSERT INTO model SELECT * EXCLUDE (cdc_op) FROM latest WHERE cdc_op <> 'd'`,
		}},
		{"merge_into", []string{
			`MERGE INTO model t USING latest x ON t.id = x.id
WHEN MATCHED AND x.cdc_op = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET ` + set + `
WHEN NOT MATCHED AND x.cdc_op <> 'd' THEN INSERT VALUES (x.id, x.name, x.qty, x.price, x.note, x.cdc_position, x.cdc_source_time)`,
		}},
	}
	// apply runs a shape in a transaction, returns a digest of the model
	// it leaves when asked, and rolls back.
	apply := func(b *testing.B, stmts []string, digest bool) string {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback()
		for _, q := range stmts {
			if _, err := tx.Exec(q); err != nil {
				b.Fatalf("%s: %v", q, err)
			}
		}
		var d string
		if digest {
			if err := tx.QueryRow(`SELECT count(*) || '/' || sum(hash(id, name, qty, price, note, cdc_position)) FROM model`).Scan(&d); err != nil {
				b.Fatal(err)
			}
		}
		return d
	}
	if a, m := apply(b, shapes[0].stmts, true), apply(b, shapes[1].stmts, true); a != m {
		b.Fatalf("the shapes leave different models: %s against %s", a, m)
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			for b.Loop() {
				apply(b, sh.stmts, false)
			}
		})
	}
}
