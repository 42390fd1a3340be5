package iceberg

import (
	"maps"
	"strconv"

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
// encoding off for plainColumns and bloom filters sized for a sorted row
// group's trace ids (bloomBytesFor), unless the table's own properties
// say otherwise, and unsorted. The properties only steer the writer;
// nothing commits them, so tables made before this (or by another tool)
// are written alike. Unsorted because iceberg-go's writer sorts each
// batch it writes on its own by a declared sort order (a copy of every
// batch), which orders nothing across a file: loads gain nothing from it,
// and compaction hands it rows already in order. Where the view cannot be
// built, tbl is written as it is.
func writeView(tbl *table.Table) *table.Table { return withWriteProperties(tbl, nil) }

// withWriteProperties is writeView with the properties set over it.
func withWriteProperties(tbl *table.Table, set iceberggo.Properties) *table.Table {
	props := tbl.Properties()
	defaults := iceberggo.Properties{table.ParquetBloomFilterMaxBytesKey: strconv.Itoa(bloomBytesFor(sortedRowGroupRows))}
	for _, col := range plainColumns {
		defaults[dictKeyPrefix+col] = "false"
	}
	all := iceberggo.Properties{}
	for k, v := range defaults {
		if _, ok := props[k]; !ok {
			all[k] = v
		}
	}
	maps.Copy(all, set)
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return tbl
	}
	if err := b.SetProperties(all); err != nil {
		return tbl
	}
	if tbl.SortOrder().Len() > 0 {
		unsorted := table.UnsortedSortOrder
		if err := b.AddSortOrder(&unsorted); err != nil {
			return tbl
		}
		if err := b.SetDefaultSortOrderID(-1); err != nil { // the one added
			return tbl
		}
	}
	meta, err := b.Build()
	if err != nil {
		return tbl
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil)
}
