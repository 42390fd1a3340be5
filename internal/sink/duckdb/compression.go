package duckdb

import (
	"context"
	"database/sql"
	"fmt"
)

// JSONCompression is how the JSON columns of the tables the sink creates
// are stored: sink.duckdb.json_compression. A table keeps what it was
// created with.
type JSONCompression string

const (
	// JSONZstd compresses the raw table's (raw_data and record_metadata)
	// with zstd: a load costs a third less CPU than with DuckDB's own pick
	// and the file is a quarter of its size, for scans that parse the
	// column 4–12% slower (docs/BENCHMARKS.md, "2026-12-05, json_zstd").
	// The declared tables' (the OpenTelemetry tables' attributes) are
	// stored as with JSONAuto: there a trace read by id took ~15% longer
	// with zstd. It needs the file's storage format to be v1.2's or newer
	// (zstdStorage); in an older file the columns are stored as with
	// JSONAuto.
	JSONZstd JSONCompression = "zstd"
	// JSONAuto lets DuckDB's checkpoint pick per segment (FSST for traces).
	JSONAuto JSONCompression = "auto"
	// JSONNone stores them uncompressed, the declared tables' too:
	// cheaper loads than JSONAuto for twice its file size.
	JSONNone JSONCompression = "none"
)

// zstdStorageVersion is the oldest storage format in which DuckDB
// compresses strings with zstd (its v1.2.0; a file in it is read by
// DuckDB v1.2.0 and newer).
const zstdStorageVersion = "v1.2.0"

// jsonStorage is the USING COMPRESSION clause of a JSON column that
// table is created with: "" leaves the choice to DuckDB.
func (s *Sink) jsonStorage(ctx context.Context, table string) (string, error) {
	raw := table == s.opt.Table && s.opt.Typed == nil
	switch {
	case s.opt.JSONCompression == JSONNone:
		return " USING COMPRESSION uncompressed", nil
	case s.opt.JSONCompression == JSONAuto || !raw:
		return "", nil
	}
	ok, version, err := zstdStorage(ctx, s.db)
	if err != nil {
		return "", err
	}
	if !ok {
		s.log.Info("the database file's storage format predates zstd for strings: JSON columns compressed as DuckDB picks; a new database file gets zstd",
			"table", table, "storage_version", version, "zstd_from", zstdStorageVersion)
		return "", nil
	}
	return " USING COMPRESSION zstd", nil
}

// zstdStorage says whether db's file is in a storage format that stores
// strings with zstd, and which format it is in (as DuckDB tags it: a
// file created by tracelake before it asked for v1.2.0 is "v1.0.0+"). A
// column created with USING COMPRESSION zstd in an older file is stored
// uncompressed, twice the size of DuckDB's own pick.
func zstdStorage(ctx context.Context, db *sql.DB) (bool, string, error) {
	var version sql.NullString
	err := db.QueryRowContext(ctx,
		`SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = current_database()`).Scan(&version)
	if err != nil {
		return false, "", fmt.Errorf("read the database's storage version: %w", err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(version.String, "v%d.%d", &major, &minor); err != nil {
		return false, version.String, nil
	}
	return major > 1 || major == 1 && minor >= 2, version.String, nil
}
