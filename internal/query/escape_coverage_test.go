package query

import (
	"testing"
)

// TestEscapeCoverageRefused: ways out that no other test names, each
// refused: table functions over the catalog, the storage, secrets and
// files not on tenantEscapes's list, catalogs of DuckDB's own, statements
// that prepare or run another, SHOW refs inside a query, and references
// to a raw table, by a recursive CTE's name, inside its recursive part.
func TestEscapeCoverageRefused(t *testing.T) {
	l := newLake(t)
	refusedFor(t, l, []string{
		`SELECT * FROM pragma_storage_info('otel_spans')`,
		`SELECT * FROM duckdb_databases()`,
		`SELECT * FROM duckdb_views()`,
		`SELECT * FROM which_secret('s3://x/y', 's3')`,
		`SELECT * FROM sniff_csv('` + l.dir + `/secret.csv')`,
		`SELECT * FROM parquet_metadata('` + l.dir + `/x.parquet')`,
		`SELECT * FROM iceberg_scan('` + l.dir + `')`,
		`SELECT * FROM delta_scan('` + l.dir + `')`,
		`SELECT * FROM '` + l.dir + `/lake.duckdb'`,
		`SELECT * FROM memory.main.otel_spans`,
		`SELECT * FROM system.main.duckdb_tables`,
		`SELECT * FROM temp.otel_spans`,
		`PREPARE p AS SELECT * FROM events`,
		`EXECUTE p`,
		`CREATE TEMP MACRO m() AS 1`,
		`SELECT * FROM (SUMMARIZE SELECT * FROM otel_spans)`,
		`SELECT * FROM (DESCRIBE otel_spans)`,
		`WITH t AS (SELECT 1) SELECT * FROM t, LATERAL glob('` + l.dir + `/*')`,
		`SELECT * FROM query_table(['otel_spans'])`,
		`WITH RECURSIVE events AS (SELECT 'x' AS c UNION ALL SELECT (SELECT max(record_content::VARCHAR) FROM events) FROM events WHERE c = 'x') SELECT * FROM events`,
		`WITH RECURSIVE events AS (SELECT 'x' AS c UNION ALL SELECT c FROM events WHERE EXISTS (SELECT record_content FROM events)) SELECT * FROM events LIMIT 3`,
		`WITH RECURSIVE events AS (SELECT 'x' AS c UNION ALL (WITH q AS (SELECT record_content::VARCHAR AS c FROM events) SELECT c FROM q)) SELECT * FROM events LIMIT 3`,
		`WITH RECURSIVE events AS (SELECT 'x' AS c UNION ALL SELECT c FROM events WHERE false UNION ALL SELECT record_content::VARCHAR FROM events) SELECT * FROM events LIMIT 3`,
		`WITH RECURSIVE events AS (SELECT 'x' AS c UNION ALL SELECT c FROM events WHERE false), q AS (SELECT record_content::VARCHAR FROM events) SELECT * FROM q`,
	})
}
