//go:build !duckdb_arrow

package query

// duckdb-go builds its Arrow interface, which the read path streams
// results through, only with the duckdb_arrow build tag: build and test
// tracelake with `-tags duckdb_arrow` (the README's commands do).
var _ = tracelake_is_built_with_tags_duckdb_arrow
