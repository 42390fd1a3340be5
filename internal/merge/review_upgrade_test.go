package merge

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// An upgrade mid-stream (0e0328f): Canal positions were (es, id, row
// index) and are now (es, id). The changes tracelake stored before the
// upgrade keep their 3-part text, the ones after it get 2-part text, and
// the text "ES.ID" sorts before "ES.ID.<row>". Two statements of one
// Canal batch in one second (TestSourceOrderCanalMessagesOfOneBatchGoByKafkaOrder):
// the first message (UPDATE ids 1-3 to 'x') loaded and merged by the old
// binary, the second (UPDATE id 3 to 'y', later in the log and in Kafka)
// by the new one after the restart. The model must hold 'y'; the stored
// 'x' at "ES.2.<2>" sorts after the new change at "ES.2" and wins.
func TestReviewUpgradeMidBatchOldThreePartPositionsDoNotWin(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalMsg("INSERT", 1589373560000, 1, `[{"id":"1","name":"a"},{"id":"2","name":"b"},{"id":"3","name":"c"}]`, ""))
	l.raw(0, "example", canalMsg("UPDATE", 1589373561000, 2, `[{"id":"1","name":"x"},{"id":"2","name":"x"},{"id":"3","name":"x"}]`,
		`[{"name":"a"},{"name":"b"},{"name":"c"}]`))
	l.flush()
	l.mustMerge()
	// What the old binary stored: each row's index in its message as a
	// third part (the row with id n was row n-1 of its message).
	db := l.s.DB()
	rows, err := db.QueryContext(context.Background(), `SELECT DISTINCT table_name FROM information_schema.columns c
		WHERE column_name = '`+cdc.PositionColumn+`' AND EXISTS (SELECT 1 FROM information_schema.columns i WHERE i.table_name = c.table_name AND i.column_name = 'id')`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatal("no table with positions")
	}
	for _, tbl := range tables {
		if _, err := db.Exec(`UPDATE "` + tbl + `" SET ` + cdc.PositionColumn + ` = ` + cdc.PositionColumn +
			` || '.' || lpad(CAST(CAST(id AS BIGINT) - 1 AS VARCHAR), 20, '0') WHERE ` + cdc.PositionColumn + ` <> ''`); err != nil {
			t.Fatalf("%s: %v", tbl, err)
		}
	}
	l.want(`SELECT id, name FROM cdc_test_orders`, "1|x", "2|x", "3|x")
	// The upgraded binary loads the batch's next message.
	l.raw(0, "example", canalMsg("UPDATE", 1589373561000, 2, `[{"id":"3","name":"y"}]`, `[{"name":"x"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`, "1|x", "2|x", "3|y")
}
