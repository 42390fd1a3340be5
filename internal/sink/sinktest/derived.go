// Package sinktest holds what the sinks' tests of derived tables share: a
// declared table, a table derived from it, and batches of both.
package sinktest

import (
	"fmt"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// Spans and Ops stand for otel_spans and genai_operations: a declared
// table and one derived from it (its cost a decimal).
var (
	Spans = schema.Table{Name: "spans", Columns: []schema.Column{{Name: "name", Type: schema.String}}}
	Ops   = schema.Table{Name: "ops", Columns: []schema.Column{{Name: "name", Type: schema.String}, {Name: "cost", Type: schema.Decimal}}}
)

// DerivedBatch holds, per offset first..last of partition 0 of topic
// "traces", two Spans rows (index 0 and 1) and an Ops row derived from the
// second, named "op <offset>" and costing "<dollars>.<offset, 12 digits>".
func DerivedBatch(first, last int64, dollars int) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: last}
	for o := first; o <= last; o++ {
		for i := range 2 {
			b.Rows = fmt.Appendf(b.Rows, `{"name":"span %d.%d","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":%d}`+"\n", o, i, o, i)
			r.Records++
		}
		b.Derived = OpRow(b.Derived, o, dollars)
	}
	b.Ranges = []sink.Range{r}
	return b
}

// OpRow appends the Ops row of offset o (see DerivedBatch).
func OpRow(dst []byte, o int64, dollars int) []byte {
	return fmt.Appendf(dst, `{"name":"op %d","cost":"%d.%012d","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":1}`+"\n", o, dollars, o, o)
}
