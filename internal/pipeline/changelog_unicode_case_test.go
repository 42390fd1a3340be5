package pipeline_test

import (
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// DuckDB matches column names in any ASCII case only: "é" and "É" are two
// columns of one table to it (PostgreSQL's quoted identifiers make such a
// table), as are "Kelvin" spelled with the Kelvin sign (U+212A) and
// "kelvin". The changelog decoder compared names by Go's Unicode lower
// case, so it took them for one column named twice and dead-lettered
// every change of such a table ("DuckDB's column names ignore case"),
// and a column named with the Kelvin sign "KOFFSET" for the changelog's
// own koffset.
func TestCDCColumnNamesDifferingInNonASCIICaseAreTwo(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	produceChanges(t, cl,
		debeziumChange("a", `{"id":1,"é":"small","É":"capital"}`, 1),
		debeziumChange("b", `{"id":2,"\u212aOFFSET":7}`, 2),
		debeziumChange("c", `{"id":3,"Émile":1}`, 3),
		debeziumChange("c", `{"id":4,"émile":2}`, 4),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`)
	wantQuery(t, s.DB(), `SELECT id, "é", "É" FROM cdc_inv_a_log`, "1|small|capital")
	wantQuery(t, s.DB(), `SELECT id, "`+"\u212a"+`OFFSET" FROM cdc_inv_b_log`, "2|7")
	wantQuery(t, s.DB(), `SELECT id, "Émile", "émile" FROM cdc_inv_c_log ORDER BY id`, "3|1|", "4||2")
}
