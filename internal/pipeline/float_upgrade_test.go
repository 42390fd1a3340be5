package pipeline_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// weightChange is a Debezium PostgreSQL change (schemas on) of
// public.parcels, keyed by id, whose weight field is of type typ (the
// JsonConverter's "double" for a double precision; "string" for how a
// release before 2026-12-07 read that unknown type) holding weight, a
// JSON value.
func weightChange(op string, id, lsn int, typ, weight string) *kgo.Record {
	fields := `[{"field":"id","type":"int32"},{"field":"weight","type":"` + typ + `","optional":true}]`
	value := `{"schema":{"type":"struct","fields":[` +
		`{"field":"before","type":"struct","optional":true,"name":"srv.public.parcels.Value","fields":` + fields + `},` +
		`{"field":"after","type":"struct","optional":true,"name":"srv.public.parcels.Value","fields":` + fields + `}],` +
		`"optional":false,"name":"srv.public.parcels.Envelope"},` +
		`"payload":{"before":null,"after":{"id":` + strconv.Itoa(id) + `,"weight":` + weight + `},"op":"` + op + `",` +
		`"source":{"connector":"postgresql","db":"app","schema":"public","table":"parcels","lsn":` + strconv.Itoa(lsn) + `,"ts_ms":1700000000000}}}`
	key := `{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"}],"optional":false,"name":"srv.public.parcels.Key"},"payload":{"id":` + strconv.Itoa(id) + `}}`
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte(value)}
}

// A release before 2026-12-07 read the JsonConverter's double (and float)
// as an unknown type, a string: it dead-lettered every change with a
// number in such a column, and loaded those whose value was null, which
// made the column VARCHAR. After the upgrade the column's numbers are
// DOUBLEs, which that column does not take: every change of the table
// with a number in it, and each dead letter of before replayed, was
// dead-lettered again, the rows missing from the model for good. Such a
// column takes the number's text, as a BIT(n)'s or an isostring time's
// column of text an older release made goes on taking its text.
func TestCDCDoubleColumnsAnOlderReleaseMadeTextTakeTheirText(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	// What the older release loaded: the change with a null.
	produce(t, cl, weightChange("c", 1, 10, "string", "null"))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	s.Close()

	produce(t, cl,
		weightChange("u", 1, 20, "double", "1.5"),
		weightChange("c", 2, 21, "double", "1.0E10"),
		weightChange("c", 3, 22, "double", `"NaN"`),
		weightChange("c", 4, 23, "double", "null"))
	s = openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT error FROM cdc_dlq`)
	wantQuery(t, s.DB(), `SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_app_parcels' AND column_name = 'weight'`, "VARCHAR")
	wantQuery(t, s.DB(), `SELECT id, coalesce(weight, '-') FROM cdc_app_parcels ORDER BY id`, "1|1.5", "2|1.0E10", "3|NaN", "4|-")
}
