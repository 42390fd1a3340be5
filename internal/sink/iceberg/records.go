package iceberg

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	gojson "github.com/goccy/go-json" // decodes staged rows faster than encoding/json: loads 1.7x (BenchmarkLoad)

	"github.com/tracelake/tracelake/internal/envelope"

	"github.com/tracelake/tracelake/internal/sink"
)

// The tables' columns, as in DESIGN.md, with the JSON columns as strings
// (every engine reads a string; Iceberg has no JSON type). add_time is
// last: the tables are partitioned by its day.
var (
	rawSchema = iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "uuid", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "koffset", Type: iceberggo.PrimitiveTypes.Int64},
		iceberggo.NestedField{ID: 3, Name: "kpartition", Type: iceberggo.PrimitiveTypes.Int32},
		iceberggo.NestedField{ID: 4, Name: "raw_data", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 5, Name: "record_metadata", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 6, Name: "add_time", Type: iceberggo.PrimitiveTypes.TimestampTz},
	)
	dlqSchema = iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "topic", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "partition", Type: iceberggo.PrimitiveTypes.Int32},
		iceberggo.NestedField{ID: 3, Name: "offset", Type: iceberggo.PrimitiveTypes.Int64},
		iceberggo.NestedField{ID: 4, Name: "key", Type: iceberggo.PrimitiveTypes.Binary},
		iceberggo.NestedField{ID: 5, Name: "value", Type: iceberggo.PrimitiveTypes.Binary},
		iceberggo.NestedField{ID: 6, Name: "error", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 7, Name: "stage", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 8, Name: "add_time", Type: iceberggo.PrimitiveTypes.TimestampTz},
	)
)

// diffSchema lists the differences of have from want, by column name.
func diffSchema(want, have *iceberggo.Schema) []string {
	var diff []string
	for _, w := range want.Fields() {
		h, ok := have.FindFieldByName(w.Name)
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("column %s is missing (want %s)", w.Name, w.Type))
		case !h.Type.Equals(w.Type):
			diff = append(diff, fmt.Sprintf("column %s is %s, want %s", w.Name, h.Type, w.Type))
		}
	}
	for _, h := range have.Fields() {
		if _, ok := want.FindFieldByName(h.Name); !ok {
			diff = append(diff, fmt.Sprintf("column %s is not one of tracelake's", h.Name))
		}
	}
	return diff
}

// stagedRaw is a staged raw row (envelope.AppendRawRow with ValueText);
// dead-letter rows are envelope.DLQRow.
type stagedRaw struct {
	UUID      string          `json:"uuid"`
	Offset    int64           `json:"koffset"`
	Partition int32           `json:"kpartition"`
	Value     *string         `json:"raw_data"`
	Metadata  json.RawMessage `json:"record_metadata"`
}

// buildRecord turns one staged NDJSON file into an Arrow record batch of
// the rows past fence (nil if none) and adds them to counts per
// partition. topics (see topicsByPartition) saves decoding a raw row's
// metadata for its topic.
func buildRecord(data []byte, dlq bool, fence map[sink.TopicPartition]int64, topics map[int32]string, now time.Time,
	counts map[sink.TopicPartition]int64) (arrow.RecordBatch, error) {
	sc, err := arrowSchema(dlq)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	if !dlq {
		// raw_data is most of a staged row: room for all of it up front
		// spares the builder's doubling copies.
		b.Field(3).(*array.StringBuilder).ReserveData(len(data))
	}
	ts := arrow.Timestamp(now.UnixMicro())
	past := func(tp sink.TopicPartition, offset int64) bool {
		next, ok := fence[tp]
		return !ok || offset >= next
	}
	n := 0
	for _, line := range sink.Lines(data) {
		if dlq {
			var r envelope.DLQRow
			if err := gojson.Unmarshal(line, &r); err != nil {
				return nil, fmt.Errorf("staged dead-letter row: %w", err)
			}
			tp := sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			if !past(tp, r.Offset) {
				continue
			}
			b.Field(0).(*array.StringBuilder).Append(r.Topic)
			b.Field(1).(*array.Int32Builder).Append(r.Partition)
			b.Field(2).(*array.Int64Builder).Append(r.Offset)
			if err := appendBase64(b.Field(3).(*array.BinaryBuilder), r.Key); err != nil {
				return nil, err
			}
			if err := appendBase64(b.Field(4).(*array.BinaryBuilder), r.Value); err != nil {
				return nil, err
			}
			b.Field(5).(*array.StringBuilder).Append(r.Error)
			b.Field(6).(*array.StringBuilder).Append(r.Stage)
			b.Field(7).(*array.TimestampBuilder).Append(ts)
			counts[tp]++
		} else {
			var r stagedRaw
			if err := gojson.Unmarshal(line, &r); err != nil {
				return nil, fmt.Errorf("staged raw row: %w", err)
			}
			topic, ok := topics[r.Partition]
			if !ok {
				var md struct{ Topic string }
				if err := gojson.Unmarshal(r.Metadata, &md); err != nil {
					return nil, fmt.Errorf("staged raw row's metadata: %w", err)
				}
				topic = md.Topic
			}
			tp := sink.TopicPartition{Topic: topic, Partition: r.Partition}
			if !past(tp, r.Offset) {
				continue
			}
			b.Field(0).(*array.StringBuilder).Append(r.UUID)
			b.Field(1).(*array.Int64Builder).Append(r.Offset)
			b.Field(2).(*array.Int32Builder).Append(r.Partition)
			if r.Value == nil {
				b.Field(3).AppendNull()
			} else {
				b.Field(3).(*array.StringBuilder).Append(*r.Value)
			}
			b.Field(4).(*array.StringBuilder).Append(string(r.Metadata))
			b.Field(5).(*array.TimestampBuilder).Append(ts)
			counts[tp]++
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return b.NewRecordBatch(), nil
}

// topicsByPartition maps each partition number of files to its topic, or
// returns nil if a number belongs to two topics.
func topicsByPartition(files []sink.File) map[int32]string {
	m := map[int32]string{}
	for _, f := range files {
		for _, r := range f.Ranges {
			if t, ok := m[r.Partition]; ok && t != r.Topic {
				return nil
			}
			m[r.Partition] = r.Topic
		}
	}
	return m
}

func appendBase64(b *array.BinaryBuilder, v *string) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(*v)
	if err != nil {
		return fmt.Errorf("staged dead-letter bytes: %w", err)
	}
	b.Append(raw)
	return nil
}

// arrowSchema is the Arrow form of a table's schema, as the builders fill
// it.
func arrowSchema(dlq bool) (*arrow.Schema, error) {
	sc := rawSchema
	if dlq {
		sc = dlqSchema
	}
	return table.SchemaToArrowSchema(sc, nil, false, false)
}

// countStored adds the offsets of one scanned batch to out.
func countStored(rec arrow.RecordBatch, dlq bool, offsetCol, partCol, topicCol string, out map[sink.TopicPartition]map[int64]int) error {
	col := func(name string) (arrow.Array, error) {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("no column %s", name)
		}
		return rec.Column(idx[0]), nil
	}
	offs, err := col(offsetCol)
	if err != nil {
		return err
	}
	parts, err := col(partCol)
	if err != nil {
		return err
	}
	topics, err := col(topicCol)
	if err != nil {
		return err
	}
	o, p, t := offs.(*array.Int64), parts.(*array.Int32), topics.(*array.String)
	for i := range int(rec.NumRows()) {
		topic := t.Value(i)
		if !dlq {
			var md struct{ Topic string }
			if err := json.Unmarshal([]byte(topic), &md); err != nil {
				return fmt.Errorf("record_metadata: %w", err)
			}
			topic = md.Topic
		}
		tp := sink.TopicPartition{Topic: topic, Partition: p.Value(i)}
		if out[tp] == nil {
			out[tp] = map[int64]int{}
		}
		out[tp][o.Value(i)]++
	}
	return nil
}
