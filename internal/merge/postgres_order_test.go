package merge

import (
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// pgChange is a Debezium PostgreSQL change of app.public.items (schemas
// off) keyed by id, at WAL position lsn in a transaction that follows the
// one that committed at lastCommit: source.sequence, which the connector
// writes as the JSON text of [lastCommitLsn, lsn] (SourceInfo.sequence);
// lastCommit "" writes null there (no commit seen since the connector's
// offsets began), and -1 leaves sequence out (a connector before it).
func pgChange(op string, lastCommit string, lsn int, row string) string {
	seq := `,"sequence":"[\"` + lastCommit + `\",\"` + strconv.Itoa(lsn) + `\"]"`
	switch lastCommit {
	case "":
		seq = `,"sequence":"[null,\"` + strconv.Itoa(lsn) + `\"]"`
	case "-1":
		seq = ""
	}
	before, after := "null", row
	if op == "d" {
		before, after = row, "null"
	}
	return `{"before":` + before + `,"after":` + after + `,"source":{"version":"2.7.0.Final","connector":"postgresql","name":"pg","ts_ms":1700000000000,"snapshot":"false","db":"app"` + seq +
		`,"schema":"public","table":"items","txId":555,"lsn":` + strconv.Itoa(lsn) + `},"op":"` + op + `","ts_ms":1700000000100}`
}

// Debezium's incremental snapshot (DBLog's watermarks) reads a chunk of
// rows between a low and a high watermark it writes to the signal table,
// drops from the chunk the keys that changes committed between the two
// touch, and sends the rest as op r when the stream reaches the high
// watermark, with the stream's position there
// (AbstractIncrementalSnapshotChangeEventSource.closeWindow and
// sendWindowEvents: the offset context of the high watermark's event).
// PostgreSQL decodes transactions in commit order, and a change's lsn is
// where it was written: a transaction that changed a row before the
// chunk's read and commits after the high watermark is read as the row's
// old value, and its change comes after the snapshot row, in Kafka and in
// the source, with an lsn below the high watermark's. Ordered by lsn, the
// model kept the snapshot's old value for good. Source.sequence's last
// commit LSN orders transactions by commit.
func TestPostgresChangeCommittedAfterAnIncrementalSnapshotChunkWins(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatDebezium)
	const topic = "pg.public.items"
	l.rawKey(0, topic, `{"id":1}`, pgChange("c", "90", 100, `{"id":1,"v":"a"}`))
	l.rawKey(0, topic, `{"id":2}`, pgChange("c", "90", 110, `{"id":2,"v":"a"}`))
	l.flush()
	l.mustMerge()
	// A transaction updates id 1 at lsn 150 and is still open when the
	// chunk is read (id 1 as "a") between the low watermark (committed
	// at 200) and the high one (written at 300, committed at 310).
	l.rawKey(0, topic, `{"id":1}`, pgChange("r", "200", 300, `{"id":1,"v":"a"}`))
	l.rawKey(0, topic, `{"id":2}`, pgChange("r", "200", 300, `{"id":2,"v":"a"}`))
	l.flush()
	l.mustMerge()
	// The transaction commits after the high watermark.
	l.rawKey(0, topic, `{"id":1}`, pgChange("u", "310", 150, `{"id":1,"v":"b"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_app_items`, "1|b", "2|a")
}

// A change whose source.sequence has no last commit (null: the first
// transaction since the connector's offsets began) is ordered by its LSN
// against the next transactions, and a change of a connector before
// sequence (or stored by a release that ordered by the LSN alone) by its
// LSN against the commit LSNs that follow: either way a later
// transaction's change of the row wins, as the row's lock ordered them.
func TestPostgresPositionsWithoutALastCommit(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatDebezium)
	const topic = "pg.public.items"
	l.rawKey(0, topic, `{"id":3}`, pgChange("c", "-1", 500, `{"id":3,"v":"old"}`))
	l.rawKey(0, topic, `{"id":4}`, pgChange("c", "", 700, `{"id":4,"v":"first"}`))
	l.flush()
	l.mustMerge()
	l.rawKey(0, topic, `{"id":3}`, pgChange("u", "600", 650, `{"id":3,"v":"new"}`))
	l.rawKey(0, topic, `{"id":4}`, pgChange("u", "720", 715, `{"id":4,"v":"next"}`))
	// Delivered again: a change older than what the model holds.
	l.rawKey(0, topic, `{"id":4}`, pgChange("c", "", 700, `{"id":4,"v":"first"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_app_items`, "3|new", "4|next")
}

// A transaction whose changes straddle the upgrade: its first change of a
// row was stored by a release that ordered by the LSN alone (position
// (lsn), as a connector without sequence still writes), its second,
// later in the same transaction, comes with sequence: (last commit LSN,
// lsn), whose first part, the commit before the transaction's, is below
// the first change's LSN. Compared as tuples the later change sorted
// before the stored one and was dropped for a resend: the model kept the
// transaction's first value of the row for good.
func TestPostgresTransactionAcrossTheUpgradeKeepsItsLastChange(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatDebezium)
	const topic = "pg.public.items"
	// Stored before the upgrade: the transaction after the commit at 400
	// inserts id 7 at 500.
	l.rawKey(0, topic, `{"id":7}`, pgChange("c", "-1", 500, `{"id":7,"v":"inserted"}`))
	l.flush()
	l.mustMerge()
	// After it: the same transaction updates id 7 at 520, then commits.
	l.rawKey(0, topic, `{"id":7}`, pgChange("u", "400", 520, `{"id":7,"v":"updated"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_app_items`, "7|updated")
	// The next transaction (after the commit at 530) deletes it.
	l.rawKey(0, topic, `{"id":7}`, pgChange("d", "530", 540, `{"id":7,"v":"updated"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_app_items`, "0")
}

// The same, unmerged: both changes in the changelog table, the latest per
// key picked among them.
func TestPostgresTransactionAcrossTheUpgradeInOneMerge(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatDebezium)
	const topic = "pg.public.items"
	l.rawKey(0, topic, `{"id":7}`, pgChange("c", "-1", 500, `{"id":7,"v":"inserted"}`))
	l.flush()
	l.rawKey(0, topic, `{"id":7}`, pgChange("u", "400", 520, `{"id":7,"v":"updated"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_app_items`, "7|updated")
}
