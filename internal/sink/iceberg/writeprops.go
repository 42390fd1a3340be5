package iceberg

import (
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// plainColumns are the raw table's columns that hold a different value in
// nearly every row (the message, its uuid, its metadata): a Parquet
// dictionary never pays there, yet the writer builds one for each column
// chunk (copying every value into a hash table) until it passes its size
// limit and falls back to plain pages. Written plain from the start, the
// Iceberg run's CPU per row beyond the bare consume fell from 7.9-9.3 µs
// to 6.9-7.3 (docs/BENCHMARKS.md, "2026-12-03, iceberg_plain_columns").
var plainColumns = []string{"raw_data", "uuid", "record_metadata"}

// dictKeyPrefix is iceberg-go's per-column switch of dictionary encoding
// (table/internal/parquet_files.go, ParquetDictEncodingColumnEnabledKeyPrefix:
// the Java implementation's write.parquet.dict-encoding-enabled.column.<name>).
const dictKeyPrefix = "write.parquet.dict-encoding-enabled.column."

// writeView is tbl as its data files are written: with dictionary
// encoding off for plainColumns, unless the table's own properties say
// otherwise. The properties only steer the writer; nothing commits them,
// so tables made before this (or by another tool) are written alike.
// Where the view cannot be built, tbl is written as it is.
func writeView(tbl *table.Table) *table.Table {
	props := tbl.Properties()
	set := iceberggo.Properties{}
	for _, col := range plainColumns {
		if _, ok := props[dictKeyPrefix+col]; !ok {
			set[dictKeyPrefix+col] = "false"
		}
	}
	if len(set) == 0 {
		return tbl
	}
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return tbl
	}
	if err := b.SetProperties(set); err != nil {
		return tbl
	}
	meta, err := b.Build()
	if err != nil {
		return tbl
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil)
}
