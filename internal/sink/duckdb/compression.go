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
	// JSONAuto lets DuckDB's checkpoint pick per segment (FSST or a
	// dictionary for traces; never zstd, see dsnSettings). The default.
	JSONAuto JSONCompression = "auto"
	// JSONZstd compresses the raw table's (raw_data and record_metadata)
	// with zstd: for ~1 KB values a load costs a third less CPU than with
	// JSONAuto and the file is a quarter of its size, for scans that parse
	// the column 4–12% slower (docs/BENCHMARKS.md, "2026-12-05,
	// json_zstd"). Not the default, because DuckDB decompresses a vector
	// of up to 2,048 values into one buffer that must fit in memory_limit
	// (ZSTDScanState::ScanInternal, src/storage/compression/zstd.cpp):
	// with values averaging about memory_limit/2,048 or more, scans of
	// the column fail with DuckDB's Out of Memory where JSONAuto's
	// storage reads them
	// (TestLargeValuesReadBackWithinTheMemoryLimit). The declared tables'
	// JSON columns (the OpenTelemetry tables' attributes) are stored as
	// with JSONAuto: there a trace read by id took ~15% longer with zstd.
	// A new database file is then created in a storage format that has
	// zstd for strings (zstdStorageVersion); in an older file the raw
	// table is created as with JSONAuto, and Prepare logs why.
	JSONZstd JSONCompression = "zstd"
	// JSONNone stores them uncompressed, the declared tables' too:
	// cheaper loads than JSONAuto for twice its file size.
	JSONNone JSONCompression = "none"
)

// zstdStorageVersion is the oldest storage format in which DuckDB
// compresses strings with zstd (its v1.2.0; a file in it is read by
// DuckDB v1.2.0 and newer). DuckDB's default, v0.10.2's, has none: a
// column asked for zstd there is stored uncompressed.
const zstdStorageVersion = "v1.2.0"

// rawJSONStorage is the USING COMPRESSION clause of the raw table's JSON
// columns with JSONZstd, should Prepare create it: "" leaves the choice
// to DuckDB (and jsonStorage applies JSONNone).
func (s *Sink) rawJSONStorage(ctx context.Context) (string, error) {
	if s.opt.JSONCompression != JSONZstd {
		return "", nil
	}
	ok, version, err := zstdStorage(ctx, s.db)
	if err != nil {
		return "", err
	}
	if !ok {
		s.log.Warn("sink.duckdb.json_compression zstd: the database file's storage format predates zstd for strings, so a raw table created in it is compressed as with auto (a new database file gets zstd)",
			"path", s.opt.Path, "storage_version", version, "zstd_from", zstdStorageVersion)
		return "", nil
	}
	return " USING COMPRESSION zstd", nil
}

// jsonStorage is the USING COMPRESSION clause of a JSON column that
// table is created with: uncompressed with JSONNone, the raw table's
// rawJSON (rawJSONStorage), else DuckDB's pick.
func (s *Sink) jsonStorage(table string) string {
	switch {
	case s.opt.JSONCompression == JSONNone:
		return " USING COMPRESSION uncompressed"
	case table == s.opt.Table && s.opt.Typed == nil:
		return s.rawJSON
	}
	return ""
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
