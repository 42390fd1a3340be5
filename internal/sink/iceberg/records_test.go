package iceberg

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
)

// The topic read back from record_metadata, with and without the fast
// path, is the one envelope.AppendMetadata wrote.
func TestMetadataTopic(t *testing.T) {
	for _, topic := range []string{"llm-traces", "a.b_c-1", `odd"name\with escapes`, "ünïcode"} {
		md := envelope.AppendMetadata(nil, &kgo.Record{Topic: topic, Partition: 3, Offset: 9, Timestamp: time.Unix(0, 0)})
		got, err := metadataTopic(string(md))
		if err != nil || got != topic {
			t.Errorf("metadataTopic(%s) = %q, %v; want %q", md, got, err, topic)
		}
	}
	if _, err := metadataTopic(`{"topic":`); err == nil {
		t.Error("no error for cut metadata")
	}
}
