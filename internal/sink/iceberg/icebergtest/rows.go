package icebergtest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// LoadTable loads the first n rows of DuckDB table from (in rowid order,
// with t's columns) into each of sinks as the pipeline loads them:
// batches of batch rows, each row as the decoders write it (schema.Type's
// NDJSON forms) with its Kafka coordinates (topic "spans", partition 0,
// offset its row number), perLoad staged batches a load.
func LoadTable(tb testing.TB, db *sql.DB, from string, t *schema.Table, n, batch, perLoad int, sinks ...*iceberg.Sink) {
	tb.Helper()
	ctx := context.Background()
	fields := []string{"'ktopic', 'spans'", "'kpartition', 0", "'koffset', rowid", "'kindex', 0"}
	for _, c := range t.Columns {
		v := fmt.Sprintf("%q", c.Name)
		if c.Type == schema.Timestamp {
			v = "epoch_us(" + v + ")"
		}
		fields = append(fields, fmt.Sprintf("'%s', %s", c.Name, v))
	}
	rowsQ := "SELECT json_object(" + strings.Join(fields, ", ") + ")::VARCHAR FROM " + from + " WHERE rowid >= ? AND rowid < ? ORDER BY rowid"
	staged := make([][]sink.File, len(sinks))
	for first := 0; first < n; first += batch {
		last := min(first+batch, n) - 1
		b := &sink.Batch{ID: sink.NewBatchID(), Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "spans"},
			First: int64(first), Last: int64(last), Records: int64(last - first + 1)}}}
		rows, err := db.Query(rowsQ, first, last+1)
		if err != nil {
			tb.Fatal(err)
		}
		for rows.Next() {
			var line []byte
			if err := rows.Scan(&line); err != nil {
				tb.Fatal(err)
			}
			b.Rows = append(append(b.Rows, line...), '\n')
			b.MaxLine = max(b.MaxLine, len(line))
		}
		if err := rows.Err(); err != nil {
			tb.Fatal(err)
		}
		rows.Close()
		for i, snk := range sinks {
			f, err := snk.Stage(ctx, b)
			if err != nil {
				tb.Fatal(err)
			}
			staged[i] = append(staged[i], f)
			if len(staged[i]) == perLoad || last == n-1 {
				if _, err := snk.Load(ctx, staged[i]); err != nil {
					tb.Fatal(err)
				}
				staged[i] = staged[i][:0]
			}
		}
	}
}
