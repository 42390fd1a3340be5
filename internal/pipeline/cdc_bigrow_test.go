package pipeline_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// A 12 MB row (a source row with a 12 MB text column: the seed's rows go
// from bytes to 10 MB+) loads into its changelog table and merges into
// its model whole, beside small changes of the same table in the same
// batch, and verify counts it once.
func TestCDCTwelveMegabyteRow(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c, kgo.ProducerBatchMaxBytes(16<<20), kgo.MaxBufferedBytes(64<<20))
	big := strings.Repeat("é", 6<<20) // 12 MiB of UTF-8
	for i, body := range []string{"small", big, "after"} {
		id := strconv.Itoa(i + 1)
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(`{"id":` + id + `}`),
			Value: []byte(debeziumChange("docs", `{"id":`+id+`,"body":"`+body+`"}`, 100+10*i))})
	}
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id, strlen(body), body = repeat('é', 6 * 1024 * 1024) FROM cdc_inv_docs_log ORDER BY id`,
		"1|5|false", "2|12582912|true", "3|5|false")
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")

	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT id, strlen(body) FROM cdc_inv_docs ORDER BY id`, "1|5", "2|12582912", "3|5")
}
