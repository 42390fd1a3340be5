package pipeline_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// isoStringChange is a Debezium PostgreSQL change (schemas on) of
// public.events, keyed by id, whose d, ts and t fields carry Debezium's
// time.precision.mode=isostring text; logical names them
// io.debezium.time.IsoDate, IsoTimestamp and IsoTime when true, and
// leaves them plain strings when false.
func isoStringChange(op string, id, lsn int, logical bool, d, ts, tm string) *kgo.Record {
	name := func(n string) string {
		if !logical {
			return ""
		}
		return `,"name":"io.debezium.time.` + n + `","version":1`
	}
	fields := `[{"field":"id","type":"int32"},` +
		`{"field":"d","type":"string","optional":true` + name("IsoDate") + `},` +
		`{"field":"ts","type":"string","optional":true` + name("IsoTimestamp") + `},` +
		`{"field":"t","type":"string","optional":true` + name("IsoTime") + `}]`
	value := `{"schema":{"type":"struct","fields":[` +
		`{"field":"before","type":"struct","optional":true,"name":"srv.public.events.Value","fields":` + fields + `},` +
		`{"field":"after","type":"struct","optional":true,"name":"srv.public.events.Value","fields":` + fields + `}],` +
		`"optional":false,"name":"srv.public.events.Envelope"},` +
		`"payload":{"before":null,"after":{"id":` + strconv.Itoa(id) + `,"d":"` + d + `","ts":"` + ts + `","t":"` + tm + `"},"op":"` + op + `",` +
		`"source":{"connector":"postgresql","db":"app","schema":"public","table":"events","lsn":` + strconv.Itoa(lsn) + `,"ts_ms":1700000000000}}}`
	key := `{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"}],"optional":false,"name":"srv.public.events.Key"},"payload":{"id":` + strconv.Itoa(id) + `}}`
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte(value)}
}

// A release before ac48d7f knew no io.debezium.time.Iso* type, so with
// time.precision.mode=isostring it typed those columns by their schema
// type, string: VARCHAR columns of the changelog table and its model
// holding Debezium's text (8a16e93's logicalTypes had no entry for them;
// the first load below writes such a table). The release after it types
// them as timestamps and times of day, which no VARCHAR column holds:
// every change of such a table after the upgrade was dead-lettered (and
// an IsoTime's µs would have gone into the text column as a number). A
// column an older release made text for these values goes on taking
// them as the source's text: nothing is dead-lettered and the model
// follows the source.
func TestCDCIsoStringColumnsAnOlderReleaseMadeTextTakeTheirText(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	// What the older release loaded: its changelog and model tables.
	produce(t, cl,
		isoStringChange("c", 1, 10, false, "2017-09-15Z", "2019-07-09T02:28:57.123456Z", "04:05:11.789Z"),
		isoStringChange("c", 2, 11, false, "2017-09-15Z", "2019-07-09T02:28:57Z", "10:15:30Z"))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	s.Close()

	// The upgraded release reads the same connector's next changes.
	produce(t, cl,
		isoStringChange("u", 1, 20, true, "2017-09-16Z", "2019-07-10T02:28:57.5Z", "05:05:11.789Z"),
		isoStringChange("c", 3, 21, true, "+10000-01-01Z", "+294247-01-10T04:00:25.2Z", "00:00:00Z"))
	s = openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
	wantQuery(t, s.DB(), `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'cdc_app_events' AND column_name IN ('d', 'ts', 't') ORDER BY ALL`,
		"d|VARCHAR", "t|VARCHAR", "ts|VARCHAR")
	wantQuery(t, s.DB(), `SELECT id, d, ts, t FROM cdc_app_events ORDER BY id`,
		"1|2017-09-16Z|2019-07-10T02:28:57.5Z|05:05:11.789Z",
		"2|2017-09-15Z|2019-07-09T02:28:57Z|10:15:30Z",
		"3|+10000-01-01Z|+294247-01-10T04:00:25.2Z|00:00:00Z")
}

// bitsChange is a Debezium MySQL change (schemas on) of shop.<table>,
// keyed by id, whose flags field is a BIT(16): io.debezium.data.Bits,
// its bits little-endian in base64 (b64), when logical, else the plain
// bytes field a release before 2026-12-07 read it as.
func bitsChange(table, op string, id, pos int, logical bool, b64 string) *kgo.Record {
	name := ""
	if logical {
		name = `,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"16"}`
	}
	fields := `[{"field":"id","type":"int32"},{"field":"flags","type":"bytes","optional":true` + name + `}]`
	value := `{"schema":{"type":"struct","fields":[` +
		`{"field":"before","type":"struct","optional":true,"name":"srv.shop.` + table + `.Value","fields":` + fields + `},` +
		`{"field":"after","type":"struct","optional":true,"name":"srv.shop.` + table + `.Value","fields":` + fields + `}],` +
		`"optional":false,"name":"srv.shop.` + table + `.Envelope"},` +
		`"payload":{"before":null,"after":{"id":` + strconv.Itoa(id) + `,"flags":"` + b64 + `"},"op":"` + op + `",` +
		`"source":{"connector":"mysql","name":"srv","db":"shop","table":"` + table + `","file":"mysql-bin.000003","pos":` + strconv.Itoa(pos) + `,"ts_ms":1700000000000}}}`
	key := `{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"}],"optional":false,"name":"srv.shop.` + table + `.Key"},"payload":{"id":` + strconv.Itoa(id) + `}}`
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte(value)}
}

// A BIT(n) is the number its bits make (see cdc's TestDebeziumBitsAreTheirNumber):
// a new table's column is a BIGINT, and a column a release before 2026-12-07
// made text (the base64 of the bits) goes on taking that text, neither
// dead-lettering every change nor mixing numbers into it.
func TestCDCBitsAreNumbersAndAnOlderReleasesTextStays(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	// What the older release loaded: b'101' as text.
	produce(t, cl, bitsChange("old", "c", 1, 10, false, "BQ=="))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	s.Close()

	produce(t, cl,
		bitsChange("old", "u", 1, 20, true, "AgE="),
		bitsChange("old", "c", 2, 21, true, "BQ=="),
		bitsChange("fresh", "c", 1, 22, true, "AgE="),
		bitsChange("fresh", "c", 2, 23, true, "BQ=="))
	s = openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
	wantQuery(t, s.DB(), `SELECT table_name, data_type FROM information_schema.columns WHERE table_name IN ('cdc_shop_old', 'cdc_shop_fresh') AND column_name = 'flags' ORDER BY ALL`,
		"cdc_shop_fresh|BIGINT", "cdc_shop_old|VARCHAR")
	wantQuery(t, s.DB(), `SELECT id, flags FROM cdc_shop_fresh ORDER BY id`, "1|258", "2|5")
	wantQuery(t, s.DB(), `SELECT id, flags FROM cdc_shop_old ORDER BY id`, "1|AgE=", "2|BQ==")
}
