package sinktest

import (
	"context"
	"fmt"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// OlderSpans is otel_spans as the release before start_time_unix_nano
// declared it: the declared table without its last column. A table
// created from it is what an upgraded deployment has.
func OlderSpans() *schema.Table {
	t := otel.Spans
	t.Columns = t.Columns[: len(t.Columns)-1 : len(t.Columns)-1]
	return &t
}

// NewColumn is the column otel_spans declares that OlderSpans lacks.
const NewColumn = "start_time_unix_nano"

// SpanNanos is the start_time_unix_nano of SpanBatch's span at offset o:
// not a whole microsecond, so a value that went through microseconds
// shows.
func SpanNanos(o int64) int64 { return 1_700_000_000_000_000_000 + o*1000 + 7 }

// SpanBatch holds one otel_spans row per offset first..last of partition
// 0 of topic "traces" (index 0), span_id "span <offset>", with
// start_time_unix_nano (SpanNanos) if withNanos, as the decoder of that
// release writes it, else without (the older release's rows).
func SpanBatch(first, last int64, withNanos bool) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: last}
	for o := first; o <= last; o++ {
		nanos := ""
		if withNanos {
			nanos = fmt.Sprintf(`,"start_time_unix_nano":%d`, SpanNanos(o))
		}
		b.Rows = fmt.Appendf(b.Rows, `{"tenant_id":"t1","trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"span %d","start_time":%d%s,"ktopic":"traces","kpartition":0,"koffset":%d,"kindex":0}`+"\n",
			o, SpanNanos(o)/1000, nanos, o)
		r.Records++
	}
	b.Ranges = []sink.Range{r}
	return b
}

// Sink is a sink as StageLoad uses it.
type Sink interface {
	Stage(ctx context.Context, b *sink.Batch) (sink.File, error)
	Load(ctx context.Context, files []sink.File) (sink.Loaded, error)
}

// StageLoad stages each batch and loads them in one load, as a pipeline
// does, failing the test on an error.
func StageLoad(t testing.TB, s Sink, batches ...*sink.Batch) {
	t.Helper()
	ctx := context.Background()
	files := make([]sink.File, len(batches))
	for i, b := range batches {
		f, err := s.Stage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
}
