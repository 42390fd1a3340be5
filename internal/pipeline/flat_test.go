package pipeline_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// flatChange is a change of shop.customers as Debezium's ExtractNewRecordState
// flattens it with add.fields=op,db,table and delete.tombstone.handling.mode
// rewrite (schemas on): the row, __op, __db, __table and __deleted; no
// position. A nil row is the tombstone of id's key.
func flatChange(op string, id int, email string) *kgo.Record {
	key := `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"srv.shop.customers.Key"},"payload":{"id":` + strconv.Itoa(id) + `}}`
	if op == "" {
		return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key)}
	}
	deleted := "false"
	if op == "d" {
		deleted = "true"
	}
	value := `{"schema":{"type":"struct","fields":[` +
		`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"email"},` +
		`{"type":"string","optional":true,"field":"__op"},{"type":"string","optional":true,"field":"__db"},` +
		`{"type":"string","optional":true,"field":"__table"},{"type":"string","optional":true,"field":"__deleted"}],` +
		`"optional":false,"name":"srv.shop.customers.Value"},"payload":{"id":` + strconv.Itoa(id) + `,"email":"` + email + `",` +
		`"__op":"` + op + `","__db":"shop","__table":"customers","__deleted":"` + deleted + `"}}`
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte(value)}
}

// Flattened changes without a position go into the model in Kafka order:
// an update replaces its key's row, a rewritten delete and a tombstone
// remove theirs, and the added fields are no columns (see cdc's
// TestDebeziumFlattenedRowsAreChanges). They were dead-lettered.
func TestCDCFlattenedChangesMakeTheModel(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	produce(t, cl,
		flatChange("c", 1, "a"), flatChange("c", 2, "b"), flatChange("c", 3, "c"),
		flatChange("u", 1, "a2"), flatChange("d", 2, "b"), flatChange("", 3, ""))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
	wantQuery(t, s.DB(), `SELECT id, email FROM cdc_shop_customers ORDER BY id`, "1|a2")
	wantQuery(t, s.DB(), `SELECT count(*) FROM information_schema.columns WHERE table_name = 'cdc_shop_customers' AND column_name LIKE '\_\_%' ESCAPE '\'`, "0")
}
