package iceberg

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	gojson "github.com/goccy/go-json"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// typeOf is Iceberg's type of a logical type: JSON columns are strings
// (Iceberg has no JSON type; every engine reads a string), timestamps UTC.
var typeOf = map[schema.Type]iceberggo.Type{
	schema.String: iceberggo.PrimitiveTypes.String, schema.Int32: iceberggo.PrimitiveTypes.Int32,
	schema.Int64: iceberggo.PrimitiveTypes.Int64, schema.Float64: iceberggo.PrimitiveTypes.Float64,
	schema.Bool: iceberggo.PrimitiveTypes.Bool, schema.Timestamp: iceberggo.PrimitiveTypes.TimestampTz,
	schema.JSON: iceberggo.PrimitiveTypes.String, schema.Decimal: iceberggo.DecimalTypeOf(18, 12),
}

// typedSchema is the Iceberg schema of a declared table, every column
// optional (any may be null).
func typedSchema(t *schema.Table) *iceberggo.Schema {
	cols := t.AllColumns()
	fields := make([]iceberggo.NestedField, len(cols))
	for i, c := range cols {
		fields[i] = iceberggo.NestedField{ID: i + 1, Name: c.Name, Type: typeOf[c.Type]}
	}
	return iceberggo.NewSchema(0, fields...)
}

// typedSpec partitions a declared table by tenant and by the day of its
// event time, as far as it names them.
func typedSpec(t *schema.Table, sc *iceberggo.Schema) iceberggo.PartitionSpec {
	var fields []iceberggo.PartitionField
	if f, ok := sc.FindFieldByName(t.Tenant); ok && t.Tenant != "" {
		fields = append(fields, iceberggo.PartitionField{SourceIDs: []int{f.ID}, FieldID: dayFieldID + 1, Name: t.Tenant, Transform: iceberggo.IdentityTransform{}})
	}
	if f, ok := sc.FindFieldByName(t.Time); ok && t.Time != "" {
		fields = append(fields, iceberggo.PartitionField{SourceIDs: []int{f.ID}, FieldID: dayFieldID, Name: t.Time + "_day", Transform: iceberggo.DayTransform{}})
	}
	return iceberggo.NewPartitionSpec(fields...)
}

// buildTypedRecord turns a batch's rows of a declared table (NDJSON, as
// the decoders write them: see schema.Type for each type's form) into an
// Arrow record batch of schema sc (nil if none), adding them to counts
// per partition.
func buildTypedRecord(sc *arrow.Schema, t *schema.Table, data []byte, counts map[sink.TopicPartition]int64) (arrow.RecordBatch, error) {
	if len(data) == 0 {
		return nil, nil
	}
	cols := t.AllColumns()
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	row := make(map[string]gojson.RawMessage, len(cols))
	for _, line := range sink.Lines(data) {
		clear(row)
		if err := gojson.Unmarshal(line, &row); err != nil {
			return nil, fmt.Errorf("staged row: %w", err)
		}
		for i, c := range cols {
			if err := appendTyped(b.Field(i), c.Type, row[c.Name]); err != nil {
				return nil, fmt.Errorf("staged row, column %s: %w", c.Name, err)
			}
		}
		var tp sink.TopicPartition
		if err := gojson.Unmarshal(row[schema.TopicColumn], &tp.Topic); err != nil {
			return nil, fmt.Errorf("staged row, column %s: %w", schema.TopicColumn, err)
		}
		if err := gojson.Unmarshal(row[schema.PartitionColumn], &tp.Partition); err != nil {
			return nil, fmt.Errorf("staged row, column %s: %w", schema.PartitionColumn, err)
		}
		counts[tp]++
	}
	return b.NewRecordBatch(), nil
}

// appendTyped appends one value of logical type typ, as the decoders
// write it, to b; a missing or null value is null.
func appendTyped(b array.Builder, typ schema.Type, v gojson.RawMessage) error {
	if len(v) == 0 || string(v) == "null" {
		b.AppendNull()
		return nil
	}
	switch typ {
	case schema.JSON:
		b.(*array.StringBuilder).BinaryBuilder.Append(v)
		return nil
	case schema.String:
		var s string
		if err := gojson.Unmarshal(v, &s); err != nil {
			return err
		}
		b.(*array.StringBuilder).Append(s)
	case schema.Int32:
		n, err := strconv.ParseInt(string(v), 10, 32)
		if err != nil {
			return err
		}
		b.(*array.Int32Builder).Append(int32(n))
	case schema.Int64:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return err
		}
		b.(*array.Int64Builder).Append(n)
	case schema.Timestamp:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return err
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(n))
	case schema.Float64:
		f, err := parseDouble(v)
		if err != nil {
			return err
		}
		b.(*array.Float64Builder).Append(f)
	case schema.Bool:
		b.(*array.BooleanBuilder).Append(string(v) == "true")
	case schema.Decimal:
		// Exact decimal text; the builder's type has the table's scale.
		var s string
		if err := gojson.Unmarshal(v, &s); err != nil {
			return err
		}
		db := b.(*array.Decimal128Builder)
		dt := db.Type().(*arrow.Decimal128Type)
		n, err := decimal128.FromString(s, dt.Precision, dt.Scale)
		if err != nil {
			return err
		}
		db.Append(n)
	default:
		return fmt.Errorf("BUG: logical type %d", typ)
	}
	return nil
}

// parseDouble reads a number, or the strings the decoders write for the
// values JSON lacks.
func parseDouble(v []byte) (float64, error) {
	switch s := strings.Trim(string(v), `"`); s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	default:
		return strconv.ParseFloat(s, 64)
	}
}
