package otel

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// From 2026-12-01 (the header otlp-signal) until forward mode refused
// tenancy.kafka_header "" (2026-12-03), a forwarder of that setting wrote
// each request's tenant in a header of an empty name. No loader's
// tenancy.kafka_header can name it: such a message, still in Kafka, is
// of the tenant that header holds, not a setting to fix (dead-lettered,
// or waiting for a setting that does not exist, it was never loaded).
func TestForwardedTenantInAnEmptyHeaderNameIsRead(t *testing.T) {
	value, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(sampleTraces())
	must(t, err)
	r := &kgo.Record{Topic: "otlp_spans", Value: value, Headers: []kgo.RecordHeader{
		{Key: "", Value: []byte("team-a")}, {Key: SignalHeader, Value: []byte(SignalTraces)}}}
	for _, header := range []string{"X-Scope-OrgID", ""} {
		d, err := NewDecoder(SignalTraces, EncodingProto, Tenancy{Header: header, Default: "default"})
		must(t, err)
		for _, row := range decodeRows(t, d, r) {
			if row["tenant_id"] != "team-a" {
				t.Errorf("tenancy.kafka_header %q: a row of tenant %v, want team-a", header, row["tenant_id"])
			}
		}
	}
}
