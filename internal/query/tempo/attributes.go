package tempo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// The attribute columns hold JSON objects keeping OTLP's types (see
// internal/otel): a JSON integer was an int, another number a double
// (written with a fraction or an exponent, 2.0, so a whole double stays
// one; rows loaded before that hold it as 2, and read back an int), a
// string a string (bytes were base64 strings), arrays and maps as such.

// keyValues reads a JSON object of attributes, in its order.
func keyValues(js string) ([]*commonpb.KeyValue, error) {
	if js == "" || js == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	v, err := anyValueOf(dec)
	if err != nil {
		return nil, fmt.Errorf("read attributes: %w", err)
	}
	kv, ok := v.Value.(*commonpb.AnyValue_KvlistValue)
	if !ok {
		return nil, fmt.Errorf("read attributes: not a JSON object")
	}
	return kv.KvlistValue.Values, nil
}

// anyValueOf reads the next JSON value of dec as an OTLP value.
func anyValueOf(dec *json.Decoder) (*commonpb.AnyValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var kvs []*commonpb.KeyValue
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := anyValueOf(dec)
				if err != nil {
					return nil, err
				}
				kvs = append(kvs, &commonpb.KeyValue{Key: k.(string), Value: v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}, nil
		case '[':
			var vs []*commonpb.AnyValue
			for dec.More() {
				v, err := anyValueOf(dec)
				if err != nil {
					return nil, err
				}
				vs = append(vs, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}, nil
		}
	case string:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: t}}, nil
	case bool:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: t}}, nil
	case json.Number:
		return numberValue(t)
	case nil:
		return &commonpb.AnyValue{}, nil
	}
	return nil, fmt.Errorf("unexpected JSON %v", tok)
}

// numberValue is an int for a JSON integer, else a double.
func numberValue(n json.Number) (*commonpb.AnyValue, error) {
	if !bytes.ContainsAny([]byte(n), ".eE") {
		if i, err := n.Int64(); err == nil {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}, nil
		}
	}
	f, err := n.Float64()
	if err != nil {
		return nil, err
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}, nil
}

// scalarValue reads one JSON value (as json_extract answers it) as an
// OTLP value.
func scalarValue(js string) (*commonpb.AnyValue, error) {
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	return anyValueOf(dec)
}
