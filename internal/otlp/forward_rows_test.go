package otlp

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

// Over gRPC, a forwarded request whose rows pass the loaders' limit (here
// a metric's description, which every point's row repeats) is refused
// InvalidArgument, which exporters do not retry, and nothing of it
// reaches Kafka; the same metric with fewer points is forwarded.
func TestForwardRefusesOverGRPCRowsItsLoadersRefuse(t *testing.T) {
	const topic = "otlp_metrics"
	c := kafkatest.Cluster(t, 1, topic)
	f, err := NewKafkaForwarder(t.Context(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, map[string]string{Metrics: topic}, "tenant", 8<<20, 1<<20, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := start(t, f, nil)
	client := pmetricotlp.NewGRPCClient(grpcConn(t, r))
	points := func(n int) pmetricotlp.ExportRequest {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("queue_depth")
		m.SetDescription(strings.Repeat("d", 8<<10))
		dps := m.SetEmptyGauge().DataPoints()
		for i := range n {
			dps.AppendEmpty().SetIntValue(int64(i))
		}
		return pmetricotlp.NewExportRequestFromMetrics(md)
	}
	// 200 points of 8 KiB of description each: 1.6 MB of rows, past 1 MiB.
	if _, err := client.Export(t.Context(), points(200)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("rows past the loaders' limit: %v, want InvalidArgument", err)
	}
	if _, err := client.Export(t.Context(), points(20)); err != nil {
		t.Errorf("rows within the loaders' limit: %v", err)
	}
	if stored := storedValues(t, c, topic); len(stored) != 1 {
		t.Errorf("%d messages in Kafka, want the request within the limit alone", len(stored))
	}
}
