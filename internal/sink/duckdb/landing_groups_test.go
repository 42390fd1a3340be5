package duckdb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// A landed 12 MB change holding a null member (as the changes of a table
// with a column default do) moves at the smallest memory_limit tracelake
// sets (128 MiB), beside one whose value its column's type does not
// take, still refused: its count of members not null was read by a
// merge patch of the row read again by json_keys, which built the row
// again and ran out of memory at every try.
func TestTwelveMegabyteChangeHoldingANullMovesAtTheSmallestMemoryLimit(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.MemoryLimit = 128 << 20; o.DistributeEvery = time.Hour })
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 1, Records: 2}}}
	docs := b.RoutedTo("cdc_db_docs_log", sink.SourceTable{Database: "db", Name: "docs"})
	docs.AddColumn(sink.Column{Name: "body", Type: schema.String})
	docs.AddColumn(sink.Column{Name: "title", Type: schema.String})
	docs.Rows = fmt.Appendf(docs.Rows, `{"body":"%s","title":null,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":0,"kindex":0}`+"\n", strings.Repeat("x", 12<<20))
	items := b.RoutedTo("cdc_db_items_log", sink.SourceTable{Database: "db", Name: "items"})
	items.AddColumn(sink.Column{Name: "qty", Type: schema.Int64})
	items.AddColumn(sink.Column{Name: "note", Type: schema.String})
	items.Rows = fmt.Appendf(items.Rows, `{"qty":"three","note":null,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":1,"kindex":0}`+"\n")
	b.MaxLine = len(docs.Rows)
	mustLoad(t, s, b)
	_, err := s.Distribute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cdc_db_items_log") || strings.Contains(err.Error(), "cdc_db_docs_log") {
		t.Fatalf("Distribute: %.300v; want the items' change refused alone", err)
	}
	wantCounts(t, s, "moved", map[string]int64{
		`SELECT count(*) FROM cdc_db_docs_log WHERE strlen(body) = 12 << 20 AND title IS NULL`: 1,
		`SELECT count(*) FROM cdc_landing WHERE log_table = 'cdc_db_items_log'`:                1,
		`SELECT count(*) FROM cdc_landing`:                                                     1,
	})
}
