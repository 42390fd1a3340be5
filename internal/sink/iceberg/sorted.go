package iceberg

import (
	"context"
	"fmt"

	"math"
	"strconv"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Files sorted for the queries people run. A table with a trace_id column
// (the spans) declares the sort order tenant_id, trace_id in its metadata,
// Iceberg's sort-orders, so other engines know it too; compaction then
// writes each partition's rows in that order, in row groups of
// sortedRowGroupRows rows, and a Parquet bloom filter on trace_id. A
// trace-id lookup then opens the files whose trace_id bounds (in the
// manifests) hold the id, and in them the row groups whose min/max do:
// the rows of one trace are adjacent, so that is one, where arrival order
// spreads every trace over every file. Measured
// (TestSortedCompactionPrunesTraceLookups, 4,000 spans of 5 services in
// row groups of 250): tenant_id, service_name, trace_id leaves a trace id
// in 9 of the 16 row groups (one run per service), tenant_id, trace_id in
// 1; a query by service reads every row group either way, and is
// narrowed by the time range. Tempo sorts its blocks by trace id and
// keeps a trace-id bloom filter the same way
// (github.com/grafana/tempo docs/sources/tempo/operations/schema.md).
// Java Iceberg's sort-based rewrite (RewriteDataFilesSparkAction with
// SortStrategy) sorts by the table's sort order as here; iceberg-go
// v0.7.0's ExecuteCompactionGroup does not sort (its writer sorts each
// batch on its own: github.com/apache/iceberg-go table/sort_keys.go),
// hence compactGroupSorted.

// sortColumns are the columns of the declared sort order, in order.
var sortColumns = []string{"tenant_id", "trace_id"}

// sortedRowGroupRows bounds a sorted file's row groups: 16,384 spans of
// ~1 KB are a few MB compressed, so a lookup that min/max statistics
// prune to one row group reads a few MB, not the whole file. (A variable
// for tests, which measure the pruning on fewer rows.)
var sortedRowGroupRows = 16384

// bloomColumnKey turns on a Parquet bloom filter on trace_id in the files
// iceberg-go writes (table/internal/parquet_files.go reads it).
const bloomColumnKey = table.ParquetBloomFilterColumnEnabledKeyPrefix + ".trace_id"

// declareLayout declares the sort order and the trace_id bloom filter on
// each table with a trace_id column that lacks them.
func (s *Sink) declareLayout(ctx context.Context) error {
	for _, id := range s.tableIDs() {
		tbl, err := s.loadTable(ctx, id)
		if err != nil {
			return err
		}
		order, ok := spanSortOrder(tbl.Schema())
		if !ok || (tbl.SortOrder().Len() > 0 && tbl.Properties()[bloomColumnKey] == "true") {
			continue
		}
		err = s.retryLostRaces(ctx, id, func(fresh *table.Table) (*table.Transaction, error) {
			txn := fresh.NewTransaction()
			if err := txn.ReplaceSortOrder(order); err != nil {
				return nil, err
			}
			return txn, txn.SetProperties(iceberggo.Properties{bloomColumnKey: "true"})
		})
		if err != nil {
			return fmt.Errorf("declare the sort order of %s: %w", name(id), err)
		}
		s.log.Info("declared the sort order files are compacted in", "table", name(id), "order", order.String())
	}
	return nil
}

// spanSortOrder is the sort order of a schema with a trace_id column.
func spanSortOrder(sc *iceberggo.Schema) (table.SortOrder, bool) {
	if _, ok := sc.FindFieldByName("trace_id"); !ok {
		return table.SortOrder{}, false
	}
	var fields []table.SortField
	for _, col := range sortColumns {
		if f, ok := sc.FindFieldByName(col); ok {
			fields = append(fields, table.SortField{SourceIDs: []int{f.ID}, Transform: iceberggo.IdentityTransform{},
				Direction: table.SortASC, NullOrder: table.NullsFirst})
		}
	}
	order, err := table.NewSortOrder(1, fields)
	return order, err == nil
}

// compactGroupSorted rewrites a group's files (of one partition, without
// deletes) into files in tbl's sort order, rolled at targetBytes, in
// bounded memory: an external merge sort (sortmerge.go).
func compactGroupSorted(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, total, targetBytes int64) (table.CompactionGroupResult, error) {
	res := table.CompactionGroupResult{BytesBefore: total}
	sc, records, err := sortedCompactionScan(tbl).ReadTasks(ctx, tasks)
	if err != nil {
		return res, fmt.Errorf("read the files to compact: %w", err)
	}
	order, err := newRowOrder(tbl, sc)
	if err != nil {
		return res, err
	}
	rgRows := rowGroupRows(tasks, targetBytes)
	sorted, done, err := sortRecords(ctx, sc, order, rgRows, records)
	if err != nil {
		return res, fmt.Errorf("sort the files to compact: %w", err)
	}
	defer done()
	opts := append(compactWriteOptions(targetBytes), table.WithParquetRowGroupLimit(rgRows))
	for df, err := range table.WriteRecords(ctx, compactView(tbl, rgRows), sc, sorted, opts...) {
		if err != nil {
			return res, fmt.Errorf("write the sorted files: %w", err)
		}
		res.NewDataFiles = append(res.NewDataFiles, df)
		res.BytesAfter += df.FileSizeBytes()
	}
	for _, t := range tasks {
		res.OldDataFiles = append(res.OldDataFiles, t.File)
	}
	return res, nil
}

// Output files at the target size. iceberg-go's writer rolls a file once
// the row groups it flushed reach its target; the row group it is filling,
// the bloom filters and the footer come on top (it wrote a 448 MB file
// for a 128 MiB target: 305 row groups each with a bloom filter of 1 MiB,
// arrow-go's size when none is given, written at the end). So compaction
// writes row groups of about a sixteenth of the target at most (in rows:
// the writer's limit in bytes counts only pages already flushed, none
// while a row group is buffered), bloom filters sized for a row group's
// trace ids, and sets the writer's target lower by a row group and a
// 32nd for the bloom filters and footer: a file ends within one row
// group of the target, and at least 3/4 of it unless it is the last.

// rowGroupBytesOf is the row group size compaction aims at for a target.
func rowGroupBytesOf(target int64) int64 { return max(target/16, 1<<10) }

// writerTarget is the target compaction gives iceberg-go's writer.
func writerTarget(target int64) int64 {
	return max(target-rowGroupBytesOf(target)-target/32, target/2)
}

// rowGroupRows is the rows of a row group of about rowGroupBytesOf(target)
// at the compressed bytes per row of the files compacted (sorted rows
// compress better, so the row groups come out smaller), at most
// sortedRowGroupRows.
func rowGroupRows(tasks []table.FileScanTask, target int64) int {
	var bytes, rows int64
	for _, t := range tasks {
		bytes += t.File.FileSizeBytes()
		rows += t.File.Count()
	}
	if bytes == 0 || rows == 0 {
		return sortedRowGroupRows
	}
	return int(min(max(rowGroupBytesOf(target)*rows/bytes, 16), int64(sortedRowGroupRows)))
}

// compactWriteOptions are the options of compaction's writes.
func compactWriteOptions(target int64) []table.WriteRecordOption {
	return []table.WriteRecordOption{table.WithClusteredWrite(), table.WithTargetFileSize(writerTarget(target)),
		table.WithRecordBatchBufferSize(compactWriteQueue)}
}

// compactView is tbl as compaction writes it: writeView's, with bloom
// filters sized for row groups of rgRows (unless the table sets their
// size).
func compactView(tbl *table.Table, rgRows int) *table.Table {
	set := iceberggo.Properties{}
	if _, ok := tbl.Properties()[table.ParquetBloomFilterMaxBytesKey]; !ok {
		set[table.ParquetBloomFilterMaxBytesKey] = strconv.Itoa(bloomBytesFor(rgRows))
	}
	return withWriteProperties(tbl, set)
}

// bloomBytesFor is the size of a split-block bloom filter for n distinct
// values at a 1% false-positive rate (arrow-go's optimalNumBytes), a power
// of two of at least 32 bytes: 32 KiB for the 16,384 trace ids of a
// sorted row group, where arrow-go would write 1 MiB.
func bloomBytesFor(n int) int {
	bits := -8 * float64(n) / math.Log(1-math.Pow(0.01, 1.0/8))
	b := 32
	for float64(b)*8 < bits {
		b *= 2
	}
	return b
}
