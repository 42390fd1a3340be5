package databendtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// The statement shapes the fake executes. Anything else fails (or, if
// Accept says so, succeeds doing nothing).
var (
	reCreateTable = regexp.MustCompile(`(?s)^CREATE TABLE IF NOT EXISTS (\S+) \((.*)\)$`)
	reDropTable   = regexp.MustCompile(`^DROP TABLE IF EXISTS (\S+)$`)
	// A task's SQL follows its options' line (merge.Databend's Task).
	reCreateTask = regexp.MustCompile(`(?s)^CREATE TASK IF NOT EXISTS (\S+) [^\n]*\nAS (.*)$`)
	reModifyTask = regexp.MustCompile(`(?s)^ALTER TASK (\S+) MODIFY AS (.*)$`)
	reTaskState  = regexp.MustCompile(`^ALTER TASK (\S+) (?:RESUME|SUSPEND)$`)
	reDesc       = regexp.MustCompile(`^DESC (\S+)$`)
	reShowCreate = regexp.MustCompile(`^SHOW CREATE TABLE (\S+)$`)
	// A table's columns with their types' nullability at every level
	// (transform mode: DESC shows none).
	reColumnTypes = regexp.MustCompile(`^SELECT name, type FROM system\.columns WHERE database = (?:currentDatabase\(\)|'(?:[^']|'')*') AND table = '((?:[^']|'')*)'$`)
	reAddColumn   = regexp.MustCompile(`^ALTER TABLE (\S+) ADD COLUMN (\S+) (.+?)( NULL)?$`)
	rePresign     = regexp.MustCompile(`^PRESIGN UPLOAD @(\S+)$`)
	// The ledger's positions, the fence table's claims (count(*), an
	// older release's read; count(*), max(claim), this one's).
	rePositions = regexp.MustCompile(`^SELECT topic, "partition", (max\(last_offset\)|count\(\*\)|count\(\*\), max\(claim\)) FROM (\S+)(?: WHERE topic IN \((.*)\))? GROUP BY topic, "partition"$`)
	// The prune of the fence table: per partition, the rows below its
	// highest claim and those without a number.
	rePruneClaims  = regexp.MustCompile(`^DELETE FROM (\S+) WHERE (\(topic = '(?:[^'\\]|''|\\.)*' AND "partition" = \d+ AND \(claim < -?\d+ OR claim IS NULL\)\)(?: OR .*)?)$`)
	rePruneTuple   = regexp.MustCompile(`\(topic = '((?:[^'\\]|''|\\.)*)' AND "partition" = (\d+) AND \(claim < (-?\d+) OR claim IS NULL\)\)`)
	reCopy         = regexp.MustCompile(`^COPY INTO (\S+) FROM @(\S+) FILES = \((.*?)\) FILE_FORMAT = \(TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO\) PURGE = FALSE FORCE = (TRUE|FALSE) ON_ERROR = CONTINUE( DISABLE_VARIANT_CHECK = TRUE)?$`)
	reLedgerInsert = regexp.MustCompile(`^INSERT INTO (\S+) \(topic, "partition", first_offset, last_offset, records, dlq_records, load_id, files, loaded_at, topic_id\) VALUES (.*)$`)
	reLedgerTuple  = regexp.MustCompile(`\('((?:[^']|'')*)', (\d+), (-?\d+), (-?\d+), (\d+), (\d+), '([^']*)', (\d+), NOW\(\), (NULL|'[^']*')\)`)
	// The topic ids recorded in a ledger (Sink.TopicIDs): evaluated by
	// the engine, as Databend's arg_max reads alike.
	reLedgerTopicIDs = regexp.MustCompile(`^SELECT topic, "partition", arg_max\(topic_id, last_offset\) FROM (\S+) WHERE topic_id IS NOT NULL AND topic IN \(.*\) GROUP BY topic, "partition"$`)
	reRemove         = regexp.MustCompile(`^REMOVE @(\S+) PATTERN = '(.*)'$`)
	reLedgerScan     = regexp.MustCompile(`^SELECT topic, "partition", first_offset, last_offset, records \+ dlq_records FROM (\S+) ORDER BY topic, "partition", first_offset, last_offset$`)
	// The ledger rows of one load (its load_id), read by a load whose
	// fence left positions out, in its transaction.
	reLedgerOfLoad = regexp.MustCompile(`^SELECT topic, "partition", first_offset, last_offset, records, dlq_records FROM (\S+) WHERE load_id = '((?:[^'\\]|'')*)'$`)
	reLedgerSize   = regexp.MustCompile(`^SELECT count\(\*\), CAST\(coalesce\(sum\(records \+ dlq_records\), 0\) AS BIGINT\) FROM (\S+)$`)
	reDLQCount     = regexp.MustCompile(`^SELECT topic, "partition", count\(\*\), count\(DISTINCT "offset"\) FROM (\S+) GROUP BY 1, 2$`)
	reRawCount     = regexp.MustCompile(`^SELECT (?:record_metadata:topic::VARCHAR|ktopic), kpartition, count\(\*\), count\(DISTINCT koffset\) FROM (\S+) GROUP BY 1, 2$`)
	// A declared table's rows (OTLP): a message's rows share its offset,
	// each has its index; a dead letter is its offset and value.
	reTypedStoredCount = regexp.MustCompile(`(?s)^SELECT topic, p, count\(\*\), count\(DISTINCT k\) FROM \(\s*SELECT ktopic AS topic, kpartition AS p, CAST\(koffset AS VARCHAR\) \|\| '/' \|\| CAST\(kindex AS VARCHAR\) AS k FROM (\S+)\s+UNION ALL SELECT topic, "partition", CAST\("offset" AS VARCHAR\) \|\| '/dead/' \|\| coalesce\(CAST\("value" AS VARCHAR\), ''\) FROM (\S+)\) AS stored GROUP BY 1, 2$`)
	reStoredCount      = regexp.MustCompile(`(?s)^SELECT topic, p, count\(\*\), count\(DISTINCT o\) FROM \(\s*SELECT record_metadata:topic::VARCHAR AS topic, kpartition AS p, koffset AS o FROM (\S+)\s+UNION ALL SELECT topic, "partition", "offset" FROM (\S+)\) AS stored GROUP BY 1, 2$`)
	// verify's count of the rows per ledger range (verify.RangeCountSQL):
	// the main table's topic, its row key (koffset, or a declared table's
	// offset and kindex), the main, dead-letter and ledger tables.
	reRangeCount = regexp.MustCompile(`^SELECT topic, p, CASE WHEN o <= reach THEN start ELSE -1 END AS r, count\(\*\), .+ FROM \(` +
		`SELECT (\S+) AS topic, kpartition AS p, koffset AS o, 1 AS m, (.+?) AS k, -1 AS lo, -1 AS hi FROM (\S+) ` +
		`UNION ALL SELECT topic, "partition", "offset", 0, .+?, -1, -1 FROM (\S+) ` +
		`UNION ALL SELECT topic, "partition", first_offset, -1, NULL, first_offset, last_offset FROM (\S+)\) AS e\) AS w WHERE m >= 0 GROUP BY 1, 2, 3$`)
	reTableCount = regexp.MustCompile(`^SELECT count\(\*\) FROM (\S+)$`)
	// The merger's look for a model's target (merge.DatabendStatements
	// Absent): the tables named so in the current database or one named.
	reSystemTables = regexp.MustCompile(`^SELECT count\(\*\) FROM system\.tables WHERE database = (?:current_database\(\)|'((?:[^'\\]|''|\\.)*)') AND name = '((?:[^'\\]|''|\\.)*)'$`)
	reDelete       = regexp.MustCompile(`^DELETE FROM (\S+)$`)
	// The merger's look for a model's resets begun and not finished
	// (merge.DatabendStatements Unfinished): its watermark rows of one
	// partition.
	reWatermarkCount = regexp.MustCompile(`^SELECT count\(\*\) FROM (tracelake_merge_watermarks) WHERE model = '((?:[^'\\]|''|\\.)*)' AND "partition" = (-?\d+)$`)
	// The GenAI rebuild's DELETE of the rows at or below the ledger's
	// positions: one (topic, partition, last offset) per partition.
	reDeleteUpTo = regexp.MustCompile(`^DELETE FROM (\S+) WHERE (\(ktopic = '(?:[^'\\]|''|\\.)*' AND kpartition = \d+ AND koffset <= -?\d+\)(?: OR .*)?)$`)
	reUpToTuple  = regexp.MustCompile(`\(ktopic = '((?:[^'\\]|''|\\.)*)' AND kpartition = (\d+) AND koffset <= (-?\d+)\)`)
	// Plain columns of a table, optionally from a time on (the report and
	// the rebuild read tables so).
	reSelectColumns = regexp.MustCompile(`^SELECT ((?:[a-z_]+)(?:, [a-z_]+)*) FROM (\S+)( WHERE start_time >= '([^']+)')?$`)
	// verify's check of a derived table (genai_operations) against its
	// main table by the rows' coordinates and the identity columns named
	// in the coalesce(CAST(… AS VARCHAR), '') of the id expression.
	reDerivedCheck = regexp.MustCompile(`^SELECT count\(\*\), count\(\*\) - count\(DISTINCT d\.k\), count\(CASE WHEN m\.k IS NULL THEN 1 END\), ` +
		`count\(CASE WHEN m\.k IS NOT NULL AND s\.k IS NULL THEN 1 END\) FROM \(SELECT .+? AS k, (.+?) AS id FROM (\S+)\) AS d ` +
		`LEFT JOIN \(SELECT DISTINCT .+? AS k FROM (\S+)\) AS m ON m\.k = d\.k LEFT JOIN \(SELECT DISTINCT .+? AS k, .+? AS id FROM \S+\) AS s ON s\.k = d\.k AND s\.id = d\.id$`)
	// verify's checks of the main-table rows that derive one against the
	// derived table, and of the derived rows whose main-table row derives
	// none (verify.Sources): plain SELECTs with joins, a variant's
	// v['key'] and v->>'key', which the engine reads as Databend does.
	reDerivedSources = regexp.MustCompile(`FROM \(SELECT [md]\.t, [md]\.p, [md]\.o, [md]\.i, [md]\.id FROM \(SELECT `)
	reIDColumn       = regexp.MustCompile(`coalesce\(CAST\("?([a-z_]+)"? AS VARCHAR\), ''\)`)
	reQuoted         = regexp.MustCompile(`'((?:[^']|'')*)'`)
)

// run executes one statement in the session sess and its transaction tx
// (both updated in place) and returns its result. Called with the lock
// held.
func (s *Server) run(sql string, sess *sessionConf, txp **txn) ([]string, [][]*string, error) {
	sql = strings.TrimSpace(sql)
	tx := *txp
	if sess.TxnState == "Fail" {
		// copy_into_txn.test: after a failed statement every statement
		// fails with 4002 until COMMIT or ROLLBACK, which end the
		// transaction without writing anything.
		if sql == "COMMIT" || sql == "ROLLBACK" {
			sess.TxnState, *txp = "AutoCommit", nil
			return nil, nil, nil
		}
		return nil, nil, &codedError{CodeTxnAborted, "Current transaction is aborted, commands ignored until end of transaction block"}
	}
	if err := s.dialectReads(*sess, sql); err != nil {
		return nil, nil, err
	}
	switch {
	case sql == "SELECT 1":
		return []string{"1"}, [][]*string{{str("1")}}, nil
	case sql == "BEGIN":
		if tx == nil {
			*txp = &txn{rows: map[string][]Row{}, history: map[string]bool{}, forced: map[string]bool{}, ttl: map[string]time.Duration{}}
			sess.TxnState = "Active"
		}
		return nil, nil, nil
	case sql == "COMMIT":
		sess.TxnState, *txp = "AutoCommit", nil
		for _, l := range s.late {
			// A late commit is checked as any commit is when it reaches
			// the meta service, load history included: one whose COPY
			// named a file another transaction committed meanwhile fails
			// with DuplicatedUpsertFiles and lands nothing.
			_ = s.commit(l)
		}
		s.late = nil
		if tx == nil {
			return nil, nil, nil
		}
		if s.LateCommit != nil && s.LateCommit() {
			s.pendingLate = tx
			return nil, nil, nil
		}
		if s.CommitError != nil {
			if code := s.CommitError(); code != 0 {
				return nil, nil, &codedError{code, commitErrorMessage(code)}
			}
		}
		if err := s.commit(tx); err != nil {
			return nil, nil, err
		}
		return nil, nil, nil
	case sql == "ROLLBACK":
		sess.TxnState, *txp = "AutoCommit", nil
		return nil, nil, nil
	}
	if m := reDropTable.FindStringSubmatch(sql); m != nil {
		// The table is gone at once (interpreter_table_drop.rs); sent
		// outside a transaction (a model's Reset), as databend-query
		// commits an open one before DDL (interpreters/interpreter.rs
		// auto_commit_if_not_allowed_in_transaction), which the fake
		// does not model.
		delete(s.tables, unquote(m[1]))
		return nil, nil, nil
	}
	if ok, err := s.task(sql); ok {
		return nil, nil, err
	}
	if m := reCreateTable.FindStringSubmatch(sql); m != nil {
		name := unquote(m[1])
		if s.tables[name] == nil {
			t := &table{}
			for _, def := range splitColumns(m[2]) {
				name, typ, _ := strings.Cut(def, " ")
				// The type is what comes before NULL, NOT NULL or DEFAULT:
				// DECIMAL(18, 12) has a space in it.
				for _, end := range []string{" NOT NULL", " NULL", " DEFAULT "} {
					if i := strings.Index(typ, end); i >= 0 {
						typ = typ[:i]
					}
				}
				t.cols = append(t.cols, unquote(name))
				t.types = append(t.types, strings.TrimSpace(typ))
			}
			s.tables[name] = t
		}
		return nil, nil, nil
	}
	if m := reAddColumn.FindStringSubmatch(sql); m != nil {
		return nil, nil, s.addColumn(m[1], unquote(m[2]), m[3])
	}
	if m := reShowCreate.FindStringSubmatch(sql); m != nil {
		// SHOW CREATE TABLE's one row: the table's name and its CREATE
		// (interpreter_table_show_create.rs; a column's AUTOINCREMENT
		// written by expression schema.rs AutoIncrementExpr::to_sql_string).
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "CREATE TABLE %s (\n", unquote(m[1]))
		for i, c := range t.cols {
			if i > 0 {
				b.WriteString(",\n")
			}
			fmt.Fprintf(&b, "  %s %s", c, t.types[i])
			if i < len(t.autoinc) && t.autoinc[i] != "" {
				b.WriteString(" " + t.autoinc[i])
			}
		}
		b.WriteString("\n) ENGINE=FUSE")
		return []string{"Table", "Create Table"}, [][]*string{{str(unquote(m[1])), str(b.String())}}, nil
	}
	if m := reDesc.FindStringSubmatch(sql); m != nil {
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		var rows [][]*string
		for i, c := range t.cols {
			// Null is the column's own nullability (interpreters util.rs
			// generate_desc_schema: is_nullable); Default its default
			// expression, NULL without one (the fake keeps none).
			null := "YES"
			if _, notNull := splitNull(t.types[i]); notNull {
				null = "NO"
			}
			rows = append(rows, []*string{str(c), str(descType(t.types[i])), str(null), str("NULL"), str("")})
		}
		return []string{"Field", "Type", "Null", "Default", "Extra"}, rows, nil
	}
	if m := reColumnTypes.FindStringSubmatch(sql); m != nil {
		// storages/system columns_table.rs: type is the column type's
		// wrapped_display (expression schema.rs), Nullable(…) at each
		// nullable level. The fake has one database.
		var rows [][]*string
		if t := s.tables[strings.ReplaceAll(m[1], "''", "'")]; t != nil {
			for i, c := range t.cols {
				rows = append(rows, []*string{str(c), str(wrappedDisplay(t.types[i]))})
			}
		}
		return []string{"name", "type"}, rows, nil
	}
	if m := rePresign.FindStringSubmatch(sql); m != nil {
		return []string{"method", "headers", "url"},
			[][]*string{{str("PUT"), str(`{"X-Fake-Presigned":"yes"}`), str(s.URL + "/presigned/" + m[1])}}, nil
	}
	if m := rePositions.FindStringSubmatch(sql); m != nil {
		return s.positions(m[2], m[3], m[1], tx)
	}
	if m := reCopy.FindStringSubmatch(sql); m != nil {
		ttl, err := s.historyTTL(*sess)
		if err != nil {
			return nil, nil, err
		}
		return s.copyInto(tx, unquote(m[1]), m[2], quotedList(m[3]), m[4] == "TRUE", ttl)
	}
	if m := reLedgerInsert.FindStringSubmatch(sql); m != nil {
		return nil, nil, s.insertLedger(tx, unquote(m[1]), m[2])
	}
	if reLedgerTopicIDs.MatchString(sql) {
		return s.execute(sql, tx)
	}
	if m := reLedgerScan.FindStringSubmatch(sql); m != nil {
		return s.ledgerScan(m[1], tx)
	}
	if m := reLedgerOfLoad.FindStringSubmatch(sql); m != nil {
		return s.ledgerOfLoad(m[1], strings.ReplaceAll(m[2], "''", "'"), tx)
	}
	if m := reLedgerSize.FindStringSubmatch(sql); m != nil {
		return s.ledgerSize(m[1], tx)
	}
	if m := reDLQCount.FindStringSubmatch(sql); m != nil {
		return s.countStored(tx, false, m[1])
	}
	if m := reRawCount.FindStringSubmatch(sql); m != nil {
		return s.countStored(tx, false, m[1])
	}
	if m := reStoredCount.FindStringSubmatch(sql); m != nil {
		return s.countStored(tx, false, m[1], m[2])
	}
	if m := reRangeCount.FindStringSubmatch(sql); m != nil {
		return s.countRanges(tx, strings.Contains(m[2], "kindex"), m[3], m[4], m[5])
	}
	if m := reTypedStoredCount.FindStringSubmatch(sql); m != nil {
		return s.countStored(tx, true, m[1], m[2])
	}
	if m := reDelete.FindStringSubmatch(sql); m != nil {
		// Inside a transaction (the rebuild's) its rows go at COMMIT,
		// with what the transaction copies in. Outside one (the reset of
		// a model whose target was made anew) it commits at once: a
		// DELETE without a filter is a truncating mutation of the table
		// (sql/src/planner/optimizer/optimizer.rs finalize_mutation_source,
		// is_truncate), and a statement in an AutoCommit session commits
		// as it ends; it rewrites the table, so a transaction that
		// rewrote it meanwhile conflicts at its COMMIT (apply).
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		if tx == nil {
			t.rows = nil
			t.rewrites++
			return nil, nil, nil
		}
		tx.rewrote(unquote(m[1]), s.tables[unquote(m[1])])
		delete(tx.rows, unquote(m[1]))
		return nil, nil, nil
	}
	if m := rePruneClaims.FindStringSubmatch(sql); m != nil {
		return nil, nil, s.pruneClaims(tx, m[1], m[2])
	}
	if m := reDeleteUpTo.FindStringSubmatch(sql); m != nil {
		// Only inside a transaction here (the rebuild's), as DELETE FROM:
		// the rows kept are its own view's, applied at COMMIT on top of
		// the rows appended since (apply).
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		if tx == nil {
			return nil, nil, errors.New("fake: DELETE outside a transaction is not modelled")
		}
		name := unquote(m[1])
		upTo := map[string]int64{}
		for _, c := range reUpToTuple.FindAllStringSubmatch(m[2], -1) {
			topic := stringLiteral(c[1])
			last, _ := strconv.ParseInt(c[3], 10, 64)
			upTo[topic+"\x00"+c[2]] = last
		}
		var kept []Row
		for _, r := range visible(t, tx, name) {
			last, ok := upTo[jsonString(r["ktopic"])+"\x00"+strconv.FormatInt(jsonInt(r["kpartition"]), 10)]
			if !ok || jsonInt(r["koffset"]) > last {
				kept = append(kept, r)
			}
		}
		tx.rewrote(name, t)
		tx.rows[name] = kept
		return nil, nil, nil
	}
	if m := reSelectColumns.FindStringSubmatch(sql); m != nil {
		loc, err := s.timezone(*sess)
		if err != nil {
			return nil, nil, err
		}
		driver, err := s.driverMode(*sess)
		if err != nil {
			return nil, nil, err
		}
		return s.selectColumns(tx, loc, driver, m[2], strings.Split(m[1], ", "), m[4])
	}
	if m := reDerivedCheck.FindStringSubmatch(sql); m != nil {
		var ids []string
		for _, c := range reIDColumn.FindAllStringSubmatch(m[1], -1) {
			ids = append(ids, c[1])
		}
		return s.derivedCheck(*txp, m[2], m[3], ids)
	}
	if strings.HasPrefix(sql, "SELECT ") && reDerivedSources.MatchString(sql) {
		return s.execute(sql, tx)
	}
	if m := reSystemTables.FindStringSubmatch(sql); m != nil {
		return s.systemTables(*sess, stringLiteral(m[1]), stringLiteral(m[2]))
	}
	if m := reWatermarkCount.FindStringSubmatch(sql); m != nil {
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		model, partition := stringLiteral(m[2]), m[3]
		n := 0
		for _, r := range visible(t, *txp, m[1]) {
			if jsonString(r["model"]) == model && strconv.FormatInt(jsonInt(r["partition"]), 10) == partition {
				n++
			}
		}
		return []string{"count(*)"}, [][]*string{{str(strconv.Itoa(n))}}, nil
	}
	if m := reTableCount.FindStringSubmatch(sql); m != nil {
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		return []string{"count()"}, [][]*string{{str(strconv.Itoa(len(visible(t, *txp, unquote(m[1])))))}}, nil
	}
	if m := reRemove.FindStringSubmatch(sql); m != nil {
		// The pattern is the literal's text as Databend's lexer reads it:
		// its backslash escapes undone (duckdbLiterals).
		lit := duckdbLiterals("'" + m[2] + "'")
		re, err := regexp.Compile(strings.ReplaceAll(lit[1:len(lit)-1], "''", "'"))
		if err != nil {
			return nil, nil, err
		}
		for p := range s.stage {
			if strings.HasPrefix(p, m[1]) && re.MatchString(p) {
				delete(s.stage, p)
			}
		}
		return nil, nil, nil
	}
	if s.Accept != nil && s.Accept(sql) {
		return nil, nil, nil
	}
	if s.SQL {
		return s.execute(sql, tx)
	}
	return nil, nil, fmt.Errorf("fake: statement not modelled: %.120s", sql)
}

// systemTables answers the count of system.tables rows of database db
// ("": the session's current database) named name. system.tables lists
// the tables there are, dropped ones not (storages/system/src/
// tables_table.rs, "tables" is TablesTable without history; the fake has
// no views). The fake's tables are one database's, the session's current
// one (its database, by default "default": service/src/sessions/
// session_ctx.rs current_database), except those created under a
// qualified name (db.t). The name is compared as written: a name quoted
// when created keeps its case.
func (s *Server) systemTables(sess sessionConf, db, name string) ([]string, [][]*string, error) {
	current := "default"
	if sess.Database != nil && *sess.Database != "" {
		current = *sess.Database
	}
	if db == "" {
		db = current
	}
	n := 0
	for key := range s.tables {
		tdb, tname, qualified := strings.Cut(key, ".")
		if !qualified {
			tdb, tname = current, key
		}
		if tdb == db && tname == name {
			n++
		}
	}
	return []string{"count(*)"}, [][]*string{{str(strconv.Itoa(n))}}, nil
}

// addColumn runs ALTER TABLE … ADD COLUMN as databend-query does: the
// column goes after the table's columns, and a column the table has is
// error 1108 (expression/src/schema.rs TableSchema::add_columns,
// AddColumnExistError; interpreters/interpreter_table_add_column.rs).
// The rows stored before hold no value of it, so they read NULL, as
// Databend's do for a nullable column added without a default
// (tests/sqllogictests/suites/base/05_ddl/
// 05_0028_ddl_alter_table_add_drop_column.test, "ADD COLUMN e int").
func (s *Server) addColumn(quoted, col, typ string) error {
	t, err := s.table(quoted)
	if err != nil {
		return err
	}
	if slices.Contains(t.cols, col) {
		return &codedError{CodeAddColumnExist, fmt.Sprintf("add column %s already exist", col)}
	}
	t.cols, t.types = append(t.cols, col), append(t.types, strings.TrimSpace(typ))
	return nil
}

// commit checks a transaction's load history and applies it. COPY's load
// history is upserted with the commit; a file loaded with FORCE = FALSE
// that another transaction committed meanwhile fails the commit (meta/api
// table_api.rs: DuplicatedUpsertFiles), nothing applied.
func (s *Server) commit(tx *txn) error {
	for k := range tx.history {
		if s.inHistory(k) {
			return &codedError{CodeDuplicatedUpsertFiles, fmt.Sprintf("DuplicatedUpsertFiles: file %s, in operation `commit`", strings.SplitN(k, "\x00", 2)[1])}
		}
	}
	return s.apply(tx)
}

// apply writes a transaction's rows and load history, as databend-query
// commits a transaction on top of what committed since it read
// (storages/fuse/src/retry/commit.rs, commit_with_backoff and
// try_rebuild_req): the rows it appended go after the others'; a table it
// rewrote keeps the rows appended since its rewrite read it, and one that
// another commit rewrote meanwhile (the segments its rewrite replaced are
// gone) fails the commit with UnresolvableConflict 4001, nothing applied.
func (s *Server) apply(tx *txn) error {
	for name, b := range tx.base {
		if s.tables[name].rewrites != b.rewrites {
			return &codedError{CodeUnresolvableConflict, commitErrorMessage(CodeUnresolvableConflict)}
		}
	}
	for name := range tx.cleared {
		t := s.tables[name]
		t.rows = append(tx.rows[name], t.rows[tx.base[name].rows:]...)
		t.rewrites++
	}
	for name, rows := range tx.rows {
		if !tx.cleared[name] {
			s.tables[name].rows = append(s.tables[name].rows, rows...)
		}
	}
	now := time.Now().Add(s.skew)
	for _, keys := range []map[string]bool{tx.history, tx.forced} {
		for k := range keys {
			s.history[k] = now.Add(tx.ttl[k])
		}
	}
	return nil
}

func (s *Server) table(quoted string) (*table, error) {
	name := unquote(quoted)
	t := s.tables[name]
	if t == nil {
		return nil, unknownTable(name)
	}
	return t, nil
}

// visible is a table's rows as the session sees them: committed rows and
// the transaction's own.
func visible(t *table, tx *txn, name string) []Row {
	rows := t.rows
	if tx != nil {
		if tx.cleared[name] {
			rows = nil
		}
		rows = append(slices.Clone(rows), tx.rows[name]...)
	}
	return rows
}

// positions answers the sink's reads of each partition's last loaded
// offset in the ledger (agg max(last_offset)) and of its claims in the
// fence table (agg count(*), an older release's; count(*), max(claim)).
// max skips NULL, and is NULL where every value is
// (functions/src/aggregates/aggregate_min_max_any.rs; sqllogictests
// query/functions/02_0000_function_aggregate_min_max_any.test, "group by
// test with all NULL rows in one group"); a column the table lacks is a
// SemanticError, as any unknown column is (planner binder: "column …
// doesn't exist").
func (s *Server) positions(name, topicList, agg string, tx *txn) ([]string, [][]*string, error) {
	t, err := s.table(name)
	if err != nil {
		return nil, nil, err
	}
	col := "" // the column max() reads
	switch agg {
	case "max(last_offset)":
		col = "last_offset"
	case "count(*), max(claim)":
		col = "claim"
	}
	if col != "" && !slices.Contains(t.cols, col) {
		return nil, nil, &codedError{CodeSemanticError, fmt.Sprintf("column %s doesn't exist", col)}
	}
	topics := quotedList(topicList)
	type key struct {
		topic string
		part  int64
	}
	type group struct {
		rows int64
		max  *int64 // nil: no value but NULL
	}
	groups := map[key]*group{}
	var order []key
	for _, r := range visible(t, tx, unquote(name)) {
		k := key{jsonString(r["topic"]), jsonInt(r["partition"])}
		if topicList != "" && !slices.Contains(topics, k.topic) { // no list: every topic
			continue
		}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.rows++
		if v, ok := r[col]; ok && col != "" && string(v) != "null" {
			if n := jsonInt(v); g.max == nil || n > *g.max {
				g.max = &n
			}
		}
	}
	var rows [][]*string
	for _, k := range order {
		g := groups[k]
		row := []*string{str(k.topic), str(strconv.FormatInt(k.part, 10))}
		if agg != "max(last_offset)" {
			row = append(row, str(strconv.FormatInt(g.rows, 10)))
		}
		if col != "" {
			var m *string
			if g.max != nil {
				m = str(strconv.FormatInt(*g.max, 10))
			}
			row = append(row, m)
		}
		rows = append(rows, row)
	}
	return append([]string{"topic", "partition"}, strings.Split(agg, ", ")...), rows, nil
}

// pruneClaims runs the sink's prune of the fence table: a DELETE on its
// own (never in a transaction here), which removes, of each partition
// named, the rows whose claim is below the bound or NULL (NULL < n is
// not true: a NULL claim goes by IS NULL only). It commits at once, and
// counts as a rewrite: a transaction that rewrote the table too fails
// at its commit (storages/fuse/src/retry/diff.rs, SegmentsDiff::apply
// refuses segments another commit replaced), while one that only
// appended keeps its rows in front of what the DELETE left (apply puts
// the appended segments first, apply below). A DELETE that commits
// beside appends keeps them (operations/common/generators/
// mutation_generator.rs, ModifiedSegmentExistsInLatest); here statements
// run one at a time, so none lands within it.
func (s *Server) pruneClaims(tx *txn, quoted, where string) error {
	t, err := s.table(quoted)
	if err != nil {
		return err
	}
	if tx != nil {
		return errors.New("fake: the claims' prune inside a transaction is not modelled")
	}
	if !slices.Contains(t.cols, "claim") {
		return &codedError{CodeSemanticError, "column claim doesn't exist"}
	}
	below := map[string]int64{} // topic \x00 partition → the bound
	for _, c := range rePruneTuple.FindAllStringSubmatch(where, -1) {
		n, _ := strconv.ParseInt(c[3], 10, 64)
		below[stringLiteral(c[1])+"\x00"+c[2]] = n
	}
	t.rows = slices.DeleteFunc(slices.Clone(t.rows), func(r Row) bool {
		n, ok := below[jsonString(r["topic"])+"\x00"+strconv.FormatInt(jsonInt(r["partition"]), 10)]
		if !ok {
			return false
		}
		v, has := r["claim"]
		return !has || string(v) == "null" || jsonInt(v) < n
	})
	t.rewrites++
	return nil
}

// copyInto runs COPY INTO in the transaction tx, or on its own (COPY
// outside a transaction commits at once, as any statement does).
func (s *Server) copyInto(tx *txn, name, location string, files []string, force bool, ttl time.Duration) ([]string, [][]*string, error) {
	t := s.tables[name]
	if t == nil {
		return nil, nil, unknownTable(name)
	}
	if tx == nil {
		own := &txn{rows: map[string][]Row{}, history: map[string]bool{}, forced: map[string]bool{}, ttl: map[string]time.Duration{}}
		cols, rows, err := s.copyInto(own, name, location, files, force, ttl)
		if err == nil {
			err = s.apply(own) // appends only: never conflicts
		}
		return cols, rows, err
	}
	// COPY lists the files it names first, a stat of each (common/storage
	// stage.rs, StageFilesInfo::list_files), and only then leaves out those
	// in the load history (sql planner/plans/copy_into_table.rs,
	// collect_files): a named file that is gone fails the COPY even when
	// the history has it. opendal's NotFound is StorageNotFound (common/
	// exception exception_into.rs).
	for _, f := range files {
		if _, ok := s.stage[location+f]; !ok {
			return nil, nil, &codedError{CodeStorageNotFound, fmt.Sprintf("NotFound (persistent) at stat, context: { path: %s } => file not found", location+f)}
		}
	}
	var out [][]*string
	for _, f := range files {
		path := location + f
		hkey := name + "\x00" + path
		if !force && (s.inHistory(hkey) || tx.history[hkey]) {
			continue // load history: already loaded
		}
		data := s.stage[path]
		rows, bad, err := parseRows(t, data)
		if err != nil {
			return nil, nil, fmt.Errorf("copy %s: %w", path, err)
		}
		// ON_ERROR = CONTINUE: a row the table cannot take is skipped and
		// counted; the first one is reported with its line.
		loaded, errors, firstLine, firstError := 0, 0, 0, ""
		for i, r := range rows {
			reason := bad[i]
			if reason == "" {
				reason = s.rowError(name, t, r)
			}
			if reason != "" {
				errors++
				if errors == 1 {
					firstLine, firstError = i+1, reason
				}
				continue
			}
			tx.rows[name] = append(tx.rows[name], r)
			loaded++
		}
		tx.ttl[hkey] = ttl
		if force {
			tx.forced[hkey] = true
		} else {
			tx.history[hkey] = true
		}
		row := []*string{str(path), str(strconv.Itoa(loaded)), str(strconv.Itoa(errors)), nil, nil}
		if errors > 0 {
			row[3], row[4] = str(firstError), str(strconv.Itoa(firstLine))
		}
		out = append(out, row)
	}
	return []string{"File", "Rows_loaded", "Errors_seen", "First_error", "First_error_line"}, out, nil
}

// historyTTL is how long the load history keeps a file a COPY in the
// session sess loads: load_file_metadata_expire_hours (default 24, scope
// Both: SET GLOBAL or the session's own).
func (s *Server) historyTTL(sess sessionConf) (time.Duration, error) {
	v := s.setting(sess, "load_file_metadata_expire_hours")
	if v == "" {
		return 24 * time.Hour, nil
	}
	h, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, &codedError{CodeSemanticError, fmt.Sprintf("invalid load_file_metadata_expire_hours %q", v)}
	}
	return time.Duration(h) * time.Hour, nil
}

// rowError says why the table cannot take r ("" if it can): a field its
// column's decoder refuses (decodeField), or what Reject says. The fields
// it takes become what their columns hold.
func (s *Server) rowError(name string, t *table, r Row) string {
	for i, c := range t.cols {
		v, ok := r[c]
		if !ok {
			// MISSING_FIELD_AS = FIELD_DEFAULT: the column's default
			// expression, or without one its type's default value
			// (sql binder/default_expr.rs parse_and_bind:
			// Scalar::default_value), NULL for a nullable column. The
			// fake keeps no default expressions: a NOT NULL column gets
			// its type's default.
			if typ, notNull := splitNull(t.types[i]); notNull {
				if d := typeDefault(typ); d != nil {
					r[c] = d
				}
			}
			continue
		}
		d, err := decodeField(t.types[i], v)
		if err != nil {
			// common/storage copy.rs FileParseError::ColumnDecodeError.
			return fmt.Sprintf("Invalid value '%s' for column %d (%s %s): %s", v, i, c, t.types[i], err)
		}
		r[c] = d
	}
	if s.Reject != nil {
		return s.Reject(name, r)
	}
	return ""
}

// typeDefault is Scalar::default_value of a type (expression
// values.rs): 0 for a number, the empty string, false, an empty array;
// nil for a type the fake does not model.
func typeDefault(typ string) json.RawMessage {
	switch {
	case intRanges[typ] != [2]float64{}, typ == "FLOAT", typ == "DOUBLE", typ == "FLOAT32", typ == "FLOAT64":
		return json.RawMessage("0")
	case typ == "VARCHAR", typ == "STRING", typ == "TEXT":
		return json.RawMessage(`""`)
	case typ == "BOOLEAN", typ == "BOOL":
		return json.RawMessage("false")
	case reArrayType.MatchString(typ):
		return json.RawMessage("[]")
	}
	return nil
}

// ledgerScan returns the ledger's ranges, ordered (verify).
func (s *Server) ledgerScan(ledger string, tx *txn) ([]string, [][]*string, error) {
	t, err := s.table(ledger)
	if err != nil {
		return nil, nil, err
	}
	rows := slices.Clone(visible(t, tx, unquote(ledger)))
	slices.SortFunc(rows, func(a, b Row) int {
		if c := strings.Compare(jsonString(a["topic"]), jsonString(b["topic"])); c != 0 {
			return c
		}
		for _, k := range []string{"partition", "first_offset", "last_offset"} {
			if c := jsonInt(a[k]) - jsonInt(b[k]); c != 0 {
				return int(c)
			}
		}
		return 0
	})
	var out [][]*string
	for _, r := range rows {
		n := jsonInt(r["records"]) + jsonInt(r["dlq_records"])
		out = append(out, []*string{str(jsonString(r["topic"])), str(string(r["partition"])), str(string(r["first_offset"])),
			str(string(r["last_offset"])), str(strconv.FormatInt(n, 10))})
	}
	return []string{"topic", "partition", "first_offset", "last_offset", "n"}, out, nil
}

// ledgerOfLoad is a ledger's rows of one load, as the session sees them
// (visible): a table its transaction has not written is read as
// committed now, one it wrote from the transaction's buffer
// (TxnManager::get_table_from_buffer,
// src/query/storages/common/session/src/transaction.rs).
func (s *Server) ledgerOfLoad(ledger, loadID string, tx *txn) ([]string, [][]*string, error) {
	t, err := s.table(ledger)
	if err != nil {
		return nil, nil, err
	}
	var out [][]*string
	for _, r := range visible(t, tx, unquote(ledger)) {
		if jsonString(r["load_id"]) != loadID {
			continue
		}
		out = append(out, []*string{str(jsonString(r["topic"])), str(string(r["partition"])), str(string(r["first_offset"])),
			str(string(r["last_offset"])), str(string(r["records"])), str(string(r["dlq_records"]))})
	}
	return []string{"topic", "partition", "first_offset", "last_offset", "records", "dlq_records"}, out, nil
}

// ledgerSize is verify's read of a ledger's size: its rows and the
// records they count.
func (s *Server) ledgerSize(ledger string, tx *txn) ([]string, [][]*string, error) {
	t, err := s.table(ledger)
	if err != nil {
		return nil, nil, err
	}
	rows := visible(t, tx, unquote(ledger))
	var n int64
	for _, r := range rows {
		n += jsonInt(r["records"]) + jsonInt(r["dlq_records"])
	}
	return []string{"count", "n"}, [][]*string{{str(strconv.Itoa(len(rows))), str(strconv.FormatInt(n, 10))}}, nil
}

// countStored counts the rows of the tables per topic and partition, and
// the distinct offsets among them, or with rowIDs the distinct rows of a
// declared table and its dead letters (verify).
func (s *Server) countStored(tx *txn, rowIDs bool, tables ...string) ([]string, [][]*string, error) {
	type key struct {
		topic string
		part  int64
	}
	rows := map[key]int{}
	distinct := map[key]map[string]bool{} // row identities
	var order []key
	for _, name := range tables {
		t, err := s.table(name)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range visible(t, tx, unquote(name)) {
			part, topic, offset, id := coordinates(r)
			if !rowIDs {
				id = offset
			}
			k := key{topic, part}
			if _, ok := distinct[k]; !ok {
				distinct[k] = map[string]bool{}
				order = append(order, k)
			}
			rows[k]++
			distinct[k][id] = true
		}
	}
	var out [][]*string
	for _, k := range order {
		out = append(out, []*string{str(k.topic), str(strconv.FormatInt(k.part, 10)), str(strconv.Itoa(rows[k])), str(strconv.Itoa(len(distinct[k])))})
	}
	return []string{"topic", "partition", "count", "distinct"}, out, nil
}

// countRanges counts the rows of the main and the dead-letter table per
// ledger range, as verify.RangeCountSQL does: each row is in the range
// with the greatest first offset at or below its own if the ranges up to
// there reach its offset, else outside (-1); per topic, partition and
// range the rows, the distinct ones (offsets, or with rowIDs a declared
// table's rows and dead letters), the main table's and the least and
// greatest offset.
func (s *Server) countRanges(tx *txn, rowIDs bool, main, dlq, ledger string) ([]string, [][]*string, error) {
	type part struct {
		topic string
		p     int64
	}
	type span struct{ first, last int64 }
	lt, err := s.table(ledger)
	if err != nil {
		return nil, nil, err
	}
	spans := map[part][]span{}
	for _, r := range visible(lt, tx, unquote(ledger)) {
		k := part{jsonString(r["topic"]), jsonInt(r["partition"])}
		spans[k] = append(spans[k], span{jsonInt(r["first_offset"]), jsonInt(r["last_offset"])})
	}
	type group struct {
		part
		r int64
	}
	type counts struct {
		rows, main int
		ids        map[string]bool
		lo, hi     int64
	}
	groups := map[group]*counts{}
	var order []group
	for _, name := range []string{main, dlq} {
		t, err := s.table(name)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range visible(t, tx, unquote(name)) {
			p, topic, offset, id := coordinates(r)
			if !rowIDs {
				id = offset
			}
			o, _ := strconv.ParseInt(offset, 10, 64)
			k := part{topic, p}
			start, reach := int64(-1), int64(-1)
			for _, sp := range spans[k] {
				if sp.first <= o {
					start, reach = max(start, sp.first), max(reach, sp.last)
				}
			}
			g := group{k, -1}
			if o <= reach {
				g.r = start
			}
			c := groups[g]
			if c == nil {
				c = &counts{ids: map[string]bool{}, lo: o, hi: o}
				groups[g] = c
				order = append(order, g)
			}
			c.rows++
			if name == main {
				c.main++
			}
			c.ids[id] = true
			c.lo, c.hi = min(c.lo, o), max(c.hi, o)
		}
	}
	var out [][]*string
	for _, g := range order {
		c := groups[g]
		out = append(out, []*string{str(g.topic), str(strconv.FormatInt(g.p, 10)), str(strconv.FormatInt(g.r, 10)), str(strconv.Itoa(c.rows)),
			str(strconv.Itoa(len(c.ids))), str(strconv.Itoa(c.main)), str(strconv.FormatInt(c.lo, 10)), str(strconv.FormatInt(c.hi, 10))})
	}
	return []string{"topic", "p", "r", "count", "distinct", "main", "min", "max"}, out, nil
}

// coordinates reads partition, topic and offset from a raw, a declared
// table's or a dead-letter row, and its identity for verify's duplicate
// count of a declared table (reTypedStoredCount): a row's (offset, index),
// a dead letter's (offset, value).
func coordinates(r Row) (part int64, topic, offset, id string) {
	if md, ok := r["record_metadata"]; ok {
		var m struct{ Topic string }
		_ = json.Unmarshal(md, &m)
		return jsonInt(r["kpartition"]), m.Topic, string(r["koffset"]), string(r["koffset"])
	}
	if t, ok := r["ktopic"]; ok {
		return jsonInt(r["kpartition"]), jsonString(t), string(r["koffset"]), string(r["koffset"]) + "/" + string(r["kindex"])
	}
	return jsonInt(r["partition"]), jsonString(r["topic"]), string(r["offset"]), string(r["offset"]) + "/dead/" + jsonString(r["value"])
}

// parseRows reads NDJSON rows into t's columns, as COPY with
// MISSING_FIELD_AS = FIELD_DEFAULT would. A field the table lacks is
// dropped from a user's table (CreateTable) and fails for the tables
// tracelake creates, so a change of the sink's encoding shows.
//
// A line serde_json::from_slice refuses (serdeRefuses) is no row: COPY
// parses the whole line before it reads a column (ndjson block_builder.rs
// read_row), an error of the row (map_json_error, InvalidRow) that
// ON_ERROR = CONTINUE counts. Its reason is in bad, by line. A number
// past a double's range is no such error: databend-query's serde_json is
// built with arbitrary_precision (the jsonb crate's default features),
// which keeps a number's text unchecked.
func parseRows(t *table, data []byte) (rows []Row, bad []string, err error) {
	lines, err := readStaged(data)
	if err != nil {
		return nil, nil, err
	}
	rows = make([]Row, 0, len(lines))
	bad = make([]string, len(lines))
	for i, l := range lines {
		if why := serdeRefuses(l); why != "" {
			bad[i] = why
			rows = append(rows, Row{})
			continue
		}
		keys, vals, err := objectFields(l)
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: not a JSON object: %w", i+1, err)
		}
		r := Row{}
		for j, k := range keys {
			// Fields match columns whatever their case (ndjson
			// block_builder.rs object_values_by_key: keys lowercased by
			// Rust's to_lowercase into a map, so of two that differ only
			// in case the last one counts; normalize_field_name lowers
			// the column's name alike).
			c := slices.IndexFunc(t.cols, func(col string) bool { return sqltext.RustLower(col) == sqltext.RustLower(k) })
			if c < 0 {
				if !t.lenient {
					return nil, nil, fmt.Errorf("line %d: field %q is not a column of the table", i+1, k)
				}
				continue
			}
			r[t.cols[c]] = vals[j]
		}
		rows = append(rows, r)
	}
	return rows, bad, nil
}

// serdeRefuses says why serde_json::from_slice refuses the JSON text l
// that Go's decoder takes ("" if it does not), as COPY words a row's
// parse error (block_builder.rs map_json_error: FileParseError::
// InvalidRow): the first of a lone surrogate escape, a container nested
// past its recursion limit.
func serdeRefuses(l []byte) string {
	pos, why := -1, ""
	note := func(at int, reason string) {
		if reason != "" && (pos < 0 || at < pos) {
			pos, why = at, reason
		}
	}
	note(loneSurrogate(l))
	note(tooDeep(l))
	if why == "" {
		return ""
	}
	return fmt.Sprintf("Invalid NDJSON row: %s at line 1, position %d of size %d", why, pos, len(l))
}

// serdeDepth is serde_json's recursion limit (de.rs Deserializer::new,
// remaining_depth: 128, the container that takes it to 0 refused).
// databend-query's Cargo.toml gives serde_json the unbounded_depth
// feature, which only makes disable_recursion_limit available; COPY's
// NDJSON reader never calls it (only the flight servers do).
const serdeDepth = 128

// tooDeep says where the JSON text l nests a container serdeDepth deep,
// and why serde_json refuses it there ("" if it does not).
func tooDeep(l []byte) (int, string) {
	depth, in := 0, false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '[' || c == '{':
			if depth++; depth == serdeDepth {
				return i, "recursion limit exceeded"
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return 0, ""
}

// loneSurrogate says why serde_json refuses the JSON text l's string
// escapes, if it does, and where: it parses a string into a Rust String,
// validating each \u escape (de.rs parse_escape, validate = true): a
// trailing surrogate first is LoneLeadingSurrogateInHexEscape, a leading
// one not followed by an escape UnexpectedEndOfHexEscape, and followed by
// one that is no trailing surrogate LoneLeadingSurrogateInHexEscape.
// Go's decoder takes each of them (as U+FFFD).
func loneSurrogate(l []byte) (int, string) {
	hex := func(i int) (int, bool) {
		if i+6 > len(l) || l[i] != '\\' || l[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(l[i+2:i+6]), 16, 16)
		return int(n), err == nil
	}
	in := false
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			n, ok := hex(i)
			if !ok {
				i++ // a one-character escape
				continue
			}
			switch {
			case n >= 0xDC00 && n <= 0xDFFF:
				return i + 6, "lone leading surrogate in hex escape"
			case n >= 0xD800 && n <= 0xDBFF:
				m, ok := hex(i + 6)
				switch {
				case i+7 >= len(l) || l[i+6] != '\\' || l[i+7] != 'u':
					return i + 6, "unexpected end of hex escape"
				case !ok || m < 0xDC00 || m > 0xDFFF:
					return i + 12, "lone leading surrogate in hex escape"
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return 0, ""
}

// int64ToTimestamp is how COPY reads an integer into a TIMESTAMP column
// (formats field_decoder/json_ast.rs read_timestamp calls expression
// utils/auto_detect_datetime.rs int64_to_timestamp): by magnitude, as
// seconds below 31,536,000,000, as milliseconds below
// 31,536,000,000,000, else as microseconds (out of 0001..9999 it is
// TIMESTAMP_MIN, types/timestamp.rs clamp_timestamp). The fake stores the
// microseconds Databend would.
func int64ToTimestamp(n int64) int64 {
	const (
		minMicros = -62135596800000000 // 0001-01-01 00:00:00
		maxMicros = 253402300799999999 // 9999-12-31 23:59:59.999999
	)
	switch {
	case -31536000000 < n && n < 31536000000:
		return n * 1_000_000
	case -31536000000000 < n && n < 31536000000000:
		return n * 1_000
	case n < minMicros || n > maxMicros:
		return minMicros
	}
	return n
}

func (s *Server) insertLedger(tx *txn, name, values string) error {
	t := s.tables[name]
	if t == nil {
		return fmt.Errorf("Unknown table '%s'", name)
	}
	tuples := reLedgerTuple.FindAllStringSubmatch(values, -1)
	if len(tuples) == 0 {
		return fmt.Errorf("fake: no ledger tuples in %q", values)
	}
	var rows []Row
	for _, m := range tuples {
		rows = append(rows, Row{
			"topic": jsonOf(strings.ReplaceAll(m[1], "''", "'")), "partition": json.RawMessage(m[2]),
			"first_offset": json.RawMessage(m[3]), "last_offset": json.RawMessage(m[4]),
			"records": json.RawMessage(m[5]), "dlq_records": json.RawMessage(m[6]),
			"load_id": jsonOf(m[7]), "files": json.RawMessage(m[8]),
		})
		if id := m[9]; id != "NULL" {
			rows[len(rows)-1]["topic_id"] = jsonOf(strings.Trim(id, "'"))
		}
	}
	s.write(tx, name, rows)
	return nil
}

func (s *Server) write(tx *txn, name string, rows []Row) {
	if tx != nil {
		tx.rows[name] = append(tx.rows[name], rows...)
		return
	}
	s.tables[name].rows = append(s.tables[name].rows, rows...)
}

// stringLiteral is the text of a string literal's inside as Databend's
// lexer reads it: a doubled quote or backslash is one character.
func stringLiteral(inside string) string {
	return strings.ReplaceAll(strings.ReplaceAll(inside, "''", "'"), `\\`, `\`)
}

func unquote(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, `"`, ""), "`", "")
}

func quotedList(s string) []string {
	var out []string
	for _, m := range reQuoted.FindAllStringSubmatch(s, -1) {
		out = append(out, strings.ReplaceAll(m[1], "''", "'"))
	}
	return out
}

func str(s string) *string { return &s }

func jsonOf(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func jsonString(r json.RawMessage) string {
	var s string
	_ = json.Unmarshal(r, &s)
	return s
}

func jsonInt(r json.RawMessage) int64 {
	n, _ := strconv.ParseInt(string(r), 10, 64)
	return n
}

// splitColumns splits CREATE TABLE's column definitions at the commas
// outside parentheses.
func splitColumns(defs string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range defs {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(defs[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(defs[start:]))
}

// derivedCheck answers verify's check of a derived table: its rows, the
// rows whose coordinates another has too, the rows whose coordinates no
// main-table row has.
func (s *Server) derivedCheck(tx *txn, derived, main string, ids []string) ([]string, [][]*string, error) {
	dt, err := s.table(derived)
	if err != nil {
		return nil, nil, err
	}
	mt, err := s.table(main)
	if err != nil {
		return nil, nil, err
	}
	key := func(r Row) string {
		return jsonString(r["ktopic"]) + "/" + string(r["kpartition"]) + "/" + string(r["koffset"]) + "/" + string(r["kindex"])
	}
	id := func(r Row) string {
		var parts []string
		for _, c := range ids {
			parts = append(parts, jsonString(r[c]))
		}
		return strings.Join(parts, "/")
	}
	inMain, same := map[string]bool{}, map[string]bool{}
	for _, r := range visible(mt, tx, unquote(main)) {
		inMain[key(r)] = true
		same[key(r)+"|"+id(r)] = true
	}
	rows := visible(dt, tx, unquote(derived))
	seen := map[string]bool{}
	orphans, mismatched := 0, 0
	for _, r := range rows {
		k := key(r)
		seen[k] = true
		switch {
		case !inMain[k]:
			orphans++
		case !same[k+"|"+id(r)]:
			mismatched++
		}
	}
	return []string{"count()", "copies", "orphans", "mismatched"}, [][]*string{{str(strconv.Itoa(len(rows))), str(strconv.Itoa(len(rows) - len(seen))),
		str(strconv.Itoa(orphans)), str(strconv.Itoa(mismatched))}}, nil
}

// selectColumns answers SELECT of plain columns, as the HTTP handler
// writes values: text, NULL as null, a TIMESTAMP (stored here as the
// microseconds COPY read) in TIMESTAMP_FORMAT (expression
// types/timestamp.rs: %Y-%m-%d %H:%M:%S%.6f) in the session's timezone
// loc (formats field_encoder/string.rs timestamp_text), or with driver
// (http_json_result_mode driver, driverMode) as its microseconds since
// the epoch (timestamp_text: HttpHandlerDataFormat::Driver), a VARIANT as its
// JSON, a string without its quotes. With since, only rows whose
// start_time is at or after it, the literal read in loc too
// (types/timestamp.rs string_to_timestamp).
func (s *Server) selectColumns(tx *txn, loc *time.Location, driver bool, name string, cols []string, since string) ([]string, [][]*string, error) {
	t, err := s.table(name)
	if err != nil {
		return nil, nil, err
	}
	types := map[string]string{}
	for i, c := range t.cols {
		types[c] = strings.ToUpper(t.types[i])
	}
	for _, c := range cols {
		if _, ok := types[c]; !ok {
			return nil, nil, &codedError{CodeSemanticError, fmt.Sprintf("column %s doesn't exist", c)}
		}
	}
	var from time.Time
	if since != "" {
		if from, err = time.ParseInLocation("2006-01-02 15:04:05.000000", since, loc); err != nil {
			return nil, nil, fmt.Errorf("fake: timestamp %q: %w", since, err)
		}
	}
	var out [][]*string
	for _, r := range visible(t, tx, unquote(name)) {
		if since != "" {
			us, err := strconv.ParseInt(string(r["start_time"]), 10, 64)
			if err != nil || time.UnixMicro(us).Before(from) {
				continue
			}
		}
		row := make([]*string, len(cols))
		for i, c := range cols {
			v, ok := r[c]
			if !ok || string(v) == "null" {
				continue
			}
			switch {
			case types[c] == "TIMESTAMP":
				us, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return nil, nil, fmt.Errorf("fake: %s is not microseconds: %s", c, v)
				}
				if driver {
					row[i] = str(strconv.FormatInt(us, 10))
				} else {
					row[i] = str(time.UnixMicro(us).In(loc).Format("2006-01-02 15:04:05.000000"))
				}
			case types[c] == "VARIANT":
				row[i] = str(string(v))
			case strings.HasPrefix(string(v), `"`):
				row[i] = str(jsonString(v))
			default:
				row[i] = str(string(v))
			}
		}
		out = append(out, row)
	}
	return cols, out, nil
}

// dialectReads refuses a statement that names anything in double quotes
// when the session's sql_dialect (the session's, else SET GLOBAL's;
// default PostgreSQL, scope Both: settings/src/settings_default.rs) is
// MySQL or Hive: there a double quote begins a string, not a name
// (ast/src/parser/input.rs Dialect::is_string_quote, is_ident_quote), so
// "trace_raw" where a table name is wanted is a syntax error,
// SyntaxException 1005 (common/exception exception_code.rs). Every
// statement of the sink names its tables so (sqltext.Name); the fake
// refuses the statement rather than read it as MySQL would.
func (s *Server) dialectReads(sess sessionConf, sql string) error {
	switch strings.ToLower(s.setting(sess, "sql_dialect")) {
	case "mysql", "hive":
	default:
		return nil
	}
	for i := 0; i < len(sql); i++ {
		switch sql[i] {
		case '\'':
			for i++; i < len(sql) && sql[i] != '\''; i++ {
				if sql[i] == '\\' {
					i++
				}
			}
		case '"':
			return &codedError{CodeSyntaxException, fmt.Sprintf("error: unexpected string literal at position %d (sql_dialect %s reads a double quote as a string)", i, s.setting(sess, "sql_dialect"))}
		}
	}
	return nil
}

// task runs a statement on a task, if sql is one (ok): CREATE TASK IF NOT
// EXISTS keeps a task there is, ALTER TASK … MODIFY AS replaces its SQL,
// RESUME and SUSPEND need it to exist (the fake runs no task: a test
// reads its SQL with TaskSQL). databend-query answers an unknown task's
// ALTER with UnknownTask.
func (s *Server) task(sql string) (bool, error) {
	if m := reCreateTask.FindStringSubmatch(sql); m != nil {
		if _, there := s.tasks[unquote(m[1])]; !there {
			s.tasks[unquote(m[1])] = m[2]
		}
		return true, nil
	}
	m := reModifyTask.FindStringSubmatch(sql)
	if m == nil {
		m = reTaskState.FindStringSubmatch(sql)
	}
	if m == nil {
		return false, nil
	}
	name := unquote(m[1])
	if _, there := s.tasks[name]; !there {
		return true, fmt.Errorf("fake: unknown task %s", name)
	}
	if len(m) == 3 {
		s.tasks[name] = m[2]
	}
	return true, nil
}
