package iceberg

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
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
// v0.7.0's ExecuteCompactionGroup does not sort
// (github.com/apache/iceberg-go table/rewrite_data_files.go), hence
// compactGroupSorted.

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

// sortKeys maps tbl's declared sort order onto columns of schema sc; nil
// if the order is empty or uses anything but identity transforms.
func sortKeys(tbl *table.Table, sc *arrow.Schema) []compute.SortKey {
	var keys []compute.SortKey
	for _, f := range tbl.SortOrder().Fields() {
		field, ok := tbl.Schema().FindFieldByID(f.SourceID())
		idx := sc.FieldIndices(field.Name)
		if _, identity := f.Transform.(iceberggo.IdentityTransform); !ok || !identity || len(idx) != 1 {
			return nil
		}
		k := compute.DefaultSortKey()
		k.ColumnIndex = idx[0]
		if f.Direction == table.SortDESC {
			k.Order = compute.SortOrderDescending
		}
		if f.NullOrder == table.NullsFirst {
			k.NullPlacement = compute.SortNullsAtStart
		}
		keys = append(keys, k)
	}
	return keys
}

// compactGroupSorted rewrites a group's files (of one partition, without
// deletes) into files in tbl's sort order. It holds the group's rows in
// memory to sort them: the planner bin-packs a group to about the target
// size of Parquet, several times that once decompressed.
func compactGroupSorted(ctx context.Context, tbl *table.Table, tasks []table.FileScanTask, total, targetBytes int64) (table.CompactionGroupResult, error) {
	res := table.CompactionGroupResult{BytesBefore: total}
	sc, records, err := tbl.Scan().ReadTasks(ctx, tasks)
	if err != nil {
		return res, fmt.Errorf("read the files to compact: %w", err)
	}
	keys := sortKeys(tbl, sc)
	if keys == nil {
		return res, errors.New("the table's sort order is not one of columns")
	}
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for rec, err := range records {
		if err != nil {
			return res, fmt.Errorf("read the files to compact: %w", err)
		}
		batches = append(batches, rec)
	}
	all := array.NewTableFromRecords(sc, batches)
	defer all.Release()
	idx, err := compute.SortIndicesTable(ctx, all, keys)
	if err != nil {
		return res, fmt.Errorf("sort: %w", err)
	}
	defer idx.Release()
	sorted, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(all), compute.NewDatumWithoutOwning(idx))
	if err != nil {
		return res, fmt.Errorf("sort: %w", err)
	}
	defer sorted.Release()
	opts := []table.WriteRecordOption{table.WithClusteredWrite(), table.WithTargetFileSize(targetBytes),
		table.WithParquetRowGroupLimit(sortedRowGroupRows)}
	for df, err := range table.WriteRecords(ctx, tbl, sc, batchesOf(sorted.(*compute.TableDatum).Value), opts...) {
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

// batchesOf yields tbl's rows as record batches (WriteRecords releases
// each one it consumes).
func batchesOf(tbl arrow.Table) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		rdr := array.NewTableReader(tbl, int64(sortedRowGroupRows))
		defer rdr.Release()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rec.Retain()
			if !yield(rec, nil) {
				return
			}
		}
		if err := rdr.Err(); err != nil {
			yield(nil, err)
		}
	}
}
