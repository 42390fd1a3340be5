package iceberg

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// The tables' columns, as in DESIGN.md, with the JSON columns as strings
// (every engine reads a string; Iceberg has no JSON type). The raw table
// has Kafka's coordinates and times as columns of their own too, for
// engines to prune on (record_metadata holds them as JSON): ktopic,
// ktimestamp (the record's timestamp) and event_time (the record's time
// as partition_by reads it from the value, else its timestamp), by whose
// day it is partitioned. The dead-letter table is partitioned by add_time's
// day.
var (
	rawSchema = iceberggo.NewSchema(0,
		iceberggo.NestedField{ID: 1, Name: "uuid", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 2, Name: "koffset", Type: iceberggo.PrimitiveTypes.Int64},
		iceberggo.NestedField{ID: 3, Name: "kpartition", Type: iceberggo.PrimitiveTypes.Int32},
		iceberggo.NestedField{ID: 4, Name: "raw_data", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 5, Name: "record_metadata", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 6, Name: "add_time", Type: iceberggo.PrimitiveTypes.TimestampTz},
		// ktopic, ktimestamp and event_time came after the first release:
		// a raw table without them gets them added (addColumns).
		iceberggo.NestedField{ID: 7, Name: "ktopic", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 8, Name: "ktimestamp", Type: iceberggo.PrimitiveTypes.TimestampTz},
		iceberggo.NestedField{ID: 9, Name: eventTimeColumn, Type: iceberggo.PrimitiveTypes.TimestampTz},
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
		// The record's headers (record_metadata's JSON list) and timestamp,
		// for a replay to load the row a first load would have; they came
		// after the first release: a dead-letter table without them gets
		// them added (addColumns).
		iceberggo.NestedField{ID: 9, Name: "headers", Type: iceberggo.PrimitiveTypes.String},
		iceberggo.NestedField{ID: 10, Name: "create_time", Type: iceberggo.PrimitiveTypes.TimestampTz},
	)
)

// eventTimeColumn is the raw table's column partitioned by day.
const eventTimeColumn = "event_time"

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
		// A column someone added (ALTER TABLE … ADD COLUMN) is left null
		// in tracelake's rows; only a required one cannot be.
		if _, ok := want.FindFieldByName(h.Name); !ok && h.Required {
			diff = append(diff, fmt.Sprintf("column %s is not one of tracelake's and is required (tracelake leaves added columns null: make it optional)", h.Name))
		}
	}
	return diff
}

// buildRawRecord turns the raw rows of records into an Arrow record batch
// of schema sc (nil if none), adding them to counts per partition. The columns are what envelope.AppendRawRow writes for the
// other sinks: raw_data is the value's bytes (NULL for an empty value),
// record_metadata envelope.AppendMetadata's JSON; then the Kafka columns,
// event_time read by eventAt.
func buildRawRecord(sc *arrow.Schema, records []sink.Record, now time.Time,
	eventAt eventTimer, counts map[sink.TopicPartition]int64) arrow.RecordBatch {
	if len(records) == 0 {
		return nil
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	uuid, offset, partition := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.Int64Builder), b.Field(2).(*array.Int32Builder)
	value, metadata, added := b.Field(3).(*array.StringBuilder), b.Field(4).(*array.StringBuilder), b.Field(5).(*array.TimestampBuilder)
	topic, stamp, event := b.Field(6).(*array.StringBuilder), b.Field(7).(*array.TimestampBuilder), b.Field(8).(*array.TimestampBuilder)
	size := 0
	for _, r := range records {
		size += len(r.Value)
	}
	// Room for every row up front spares the builders' doubling copies.
	b.Reserve(len(records))
	value.ReserveData(size)
	ts := arrow.Timestamp(now.UnixMicro())
	var scratch []byte
	for i := range records {
		r := &records[i]
		scratch = envelope.AppendUUID(scratch[:0], &r.ID)
		uuid.BinaryBuilder.Append(scratch)
		offset.Append(r.Offset)
		partition.Append(r.Partition)
		if len(r.Value) == 0 {
			value.AppendNull()
		} else {
			value.BinaryBuilder.Append(r.Value)
		}
		scratch = envelope.AppendMetadata(scratch[:0], r.Record)
		metadata.BinaryBuilder.Append(scratch)
		added.Append(ts)
		topic.Append(r.Topic)
		stamp.Append(arrow.Timestamp(r.Timestamp.UnixMicro()))
		event.Append(arrow.Timestamp(eventAt.at(r.Record).UnixMicro()))
		counts[sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}]++
	}
	return b.NewRecordBatch()
}

// buildDLQRecord turns one batch's staged dead-letter rows (NDJSON of
// envelope.DLQRow) into an Arrow record batch of schema sc (nil
// if none), adding them to counts per partition.
func buildDLQRecord(sc *arrow.Schema, data []byte, now time.Time,
	counts map[sink.TopicPartition]int64) (arrow.RecordBatch, error) {
	if len(data) == 0 {
		return nil, nil
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	ts := arrow.Timestamp(now.UnixMicro())
	for _, line := range sink.Lines(data) {
		var r envelope.DLQRow
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("staged dead-letter row: %w", err)
		}
		tp := sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}
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
		if r.Headers == nil {
			b.Field(8).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(8).(*array.StringBuilder).Append(string(r.Headers))
		}
		created := b.Field(9).(*array.TimestampBuilder)
		if r.CreateTime == nil {
			created.AppendNull()
		} else {
			at, err := time.Parse(time.RFC3339Nano, *r.CreateTime)
			if err != nil {
				return nil, fmt.Errorf("staged dead-letter row's create_time: %w", err)
			}
			created.Append(arrow.Timestamp(at.UnixMicro()))
		}
		counts[tp]++
	}
	return b.NewRecordBatch(), nil
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

// arrowSchema is the Arrow form of tracelake's columns of tbl (those of
// want), in the order the builders fill them, with
// tbl's field ids: a column added to an existing table may have another id
// than in a table tracelake created, and readers match Parquet columns to
// the table's by id.
func arrowSchema(tbl *table.Table, want *iceberggo.Schema) (*arrow.Schema, error) {
	fields := make([]iceberggo.NestedField, 0, want.NumFields())
	for _, w := range want.Fields() {
		f, ok := tbl.Schema().FindFieldByName(w.Name)
		if !ok {
			return nil, fmt.Errorf("table %s has no column %s", name(tbl.Identifier()), w.Name)
		}
		fields = append(fields, f)
	}
	return table.SchemaToArrowSchema(iceberggo.NewSchema(0, fields...), nil, false, false)
}

// storedColumns name a table's coordinates for countStored.
type storedColumns struct {
	offset, partition, topic string
	inMetadata               bool   // topic is record_metadata's JSON (the raw table)
	index                    string // a declared table's row index within its message; "" for none
}

func (c storedColumns) names() []string {
	if c.index != "" {
		return []string{c.offset, c.partition, c.topic, c.index}
	}
	return []string{c.offset, c.partition, c.topic}
}

// countStored adds the offsets of one scanned batch to out: each
// message's offset once (a declared table's rows beyond a message's first
// are counted as rows of it, not as offsets stored again, and handed to
// later, if not nil, to be checked by their index). A row at or past its
// partition's position in pos (the positions of the snapshot scanned),
// or of a partition without one, is noted as past it too.
func countStored(rec arrow.RecordBatch, c storedColumns, pos map[sink.TopicPartition]int64, out map[sink.TopicPartition]*sink.Offsets,
	later func(tp sink.TopicPartition, o int64, k int32) error) error {
	col := func(name string) (arrow.Array, error) {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("no column %s", name)
		}
		return rec.Column(idx[0]), nil
	}
	offs, err := col(c.offset)
	if err != nil {
		return err
	}
	parts, err := col(c.partition)
	if err != nil {
		return err
	}
	topics, err := col(c.topic)
	if err != nil {
		return err
	}
	var index *array.Int32
	if c.index != "" {
		ix, err := col(c.index)
		if err != nil {
			return err
		}
		index = ix.(*array.Int32)
	}
	o, p, t := offs.(*array.Int64), parts.(*array.Int32), topics.(*array.String)
	for i := range int(rec.NumRows()) {
		topic := t.Value(i)
		if c.inMetadata {
			if topic, err = metadataTopic(topic); err != nil {
				return err
			}
		}
		tp := sink.TopicPartition{Topic: topic, Partition: p.Value(i)}
		if out[tp] == nil {
			out[tp] = &sink.Offsets{}
		}
		if n, ok := pos[tp]; !ok || o.Value(i) >= n {
			out[tp].AddPast(o.Value(i))
		}
		if index != nil && index.Value(i) > 0 {
			out[tp].AddRow(o.Value(i))
			if later != nil {
				if err := later(tp, o.Value(i), index.Value(i)); err != nil {
					return err
				}
			}
			continue
		}
		out[tp].Add(o.Value(i))
	}
	return nil
}

// metadataTopic reads the topic from a record_metadata value. It starts
// with the topic (envelope.AppendMetadata), usually without an escape,
// which is read without decoding the JSON.
func metadataTopic(md string) (string, error) {
	const prefix = `{"topic":"`
	if rest, ok := strings.CutPrefix(md, prefix); ok {
		if end := strings.IndexAny(rest, `"\`); end >= 0 && rest[end] == '"' {
			return rest[:end], nil
		}
	}
	var v struct{ Topic string }
	if err := json.Unmarshal([]byte(md), &v); err != nil {
		return "", fmt.Errorf("record_metadata: %w", err)
	}
	return v.Topic, nil
}
