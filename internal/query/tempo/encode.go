package tempo

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/encoding/protojson"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// keyValue is tempopb.common.v1.KeyValue (OTLP's) in JSON, its value in
// protobuf's JSON mapping, as jsonpb writes it.
type keyValue struct {
	Key   string
	Value *commonpb.AnyValue
}

func (kv *keyValue) MarshalJSON() ([]byte, error) {
	v, err := protojson.Marshal(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("marshal attribute %s: %w", kv.Key, err)
	}
	k, err := json.Marshal(kv.Key)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"key":%s,"value":%s}`, k, v), nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
