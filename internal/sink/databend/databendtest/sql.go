package databendtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The statement shapes the fake executes. Anything else fails (or, if
// Accept says so, succeeds doing nothing).
var (
	reCreateTable  = regexp.MustCompile(`(?s)^CREATE TABLE IF NOT EXISTS (\S+) \((.*)\)$`)
	reDesc         = regexp.MustCompile(`^DESC (\S+)$`)
	reFileFormat   = regexp.MustCompile(`^CREATE FILE FORMAT IF NOT EXISTS \w+ TYPE = NDJSON COMPRESSION = AUTO$`)
	rePresign      = regexp.MustCompile(`^PRESIGN UPLOAD @(\S+)$`)
	rePositions    = regexp.MustCompile(`^SELECT topic, "partition", max\(last_offset\) FROM (\S+) WHERE topic IN \((.*)\) GROUP BY topic, "partition"$`)
	reCopy         = regexp.MustCompile(`^COPY INTO (\S+) FROM @(\S+) FILES = \((.*?)\) FILE_FORMAT = \(TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO\) PURGE = FALSE FORCE = (TRUE|FALSE)( DISABLE_VARIANT_CHECK = TRUE)?$`)
	reLedgerInsert = regexp.MustCompile(`^INSERT INTO (\S+) \(topic, "partition", first_offset, last_offset, records, dlq_records, load_id, files, loaded_at\) VALUES (.*)$`)
	reLedgerTuple  = regexp.MustCompile(`\('((?:[^']|'')*)', (\d+), (-?\d+), (-?\d+), (\d+), (\d+), '([^']*)', (\d+), NOW\(\)\)`)
	reInsertPast   = regexp.MustCompile(`^INSERT INTO (\S+) \(([^)]*)\) SELECT .* FROM @(\S+) \(FILES => \((.*?)\), FILE_FORMAT => 'tracelake_ndjson'\) WHERE NOT \((.*)\)$`)
	reSkip         = regexp.MustCompile(`\$1:(?:kpartition|partition)::INT = (\d+) AND \$1:(?:record_metadata:topic|topic)::VARCHAR = '((?:[^']|'')*)' AND \$1:(?:koffset|offset)::BIGINT <= (-?\d+)`)
	reCount        = regexp.MustCompile(`^SELECT count\(\*\) FROM (\S+) WHERE (?:kpartition|"partition") = (\d+) AND (?:record_metadata:topic::VARCHAR|topic) = '((?:[^']|'')*)' AND (?:koffset|"offset") BETWEEN (-?\d+) AND (-?\d+)$`)
	reRemove       = regexp.MustCompile(`^REMOVE @(\S+) PATTERN = '(.*)'$`)
	reQuoted       = regexp.MustCompile(`'((?:[^']|'')*)'`)
)

// run executes one statement in the session sess (updated in place) and
// returns its result. Called with the lock held.
func (s *Server) run(sql string, sess map[string]any) ([]string, [][]*string, error) {
	sql = strings.TrimSpace(sql)
	tx := s.txns[fmt.Sprint(sess["fake_txn"])]
	switch {
	case sql == "SELECT 1":
		return []string{"1"}, [][]*string{{str("1")}}, nil
	case sql == "BEGIN":
		if tx == nil {
			s.nextID++
			id := "t" + strconv.Itoa(s.nextID)
			s.txns[id] = &txn{rows: map[string][]Row{}, history: map[string]bool{}}
			sess["fake_txn"] = id
			sess["txn_state"] = "Active"
		}
		return nil, nil, nil
	case sql == "COMMIT":
		if tx != nil {
			for name, rows := range tx.rows {
				s.tables[name].rows = append(s.tables[name].rows, rows...)
			}
			for k := range tx.history {
				s.history[k] = true
			}
		}
		s.endTxn(sess)
		return nil, nil, nil
	case sql == "ROLLBACK":
		s.endTxn(sess)
		return nil, nil, nil
	}
	if m := reCreateTable.FindStringSubmatch(sql); m != nil {
		name := unquote(m[1])
		if s.tables[name] == nil {
			t := &table{}
			for _, def := range strings.Split(m[2], ", ") {
				f := strings.Fields(def)
				t.cols = append(t.cols, unquote(f[0]))
				t.types = append(t.types, f[1])
			}
			s.tables[name] = t
		}
		return nil, nil, nil
	}
	if m := reDesc.FindStringSubmatch(sql); m != nil {
		t, err := s.table(m[1])
		if err != nil {
			return nil, nil, err
		}
		var rows [][]*string
		for i, c := range t.cols {
			rows = append(rows, []*string{str(c), str(t.types[i]), str("YES"), str("NULL"), str("")})
		}
		return []string{"Field", "Type", "Null", "Default", "Extra"}, rows, nil
	}
	if reFileFormat.MatchString(sql) {
		return nil, nil, nil
	}
	if m := rePresign.FindStringSubmatch(sql); m != nil {
		return []string{"method", "headers", "url"},
			[][]*string{{str("PUT"), str(`{"X-Fake-Presigned":"yes"}`), str(s.URL + "/presigned/" + m[1])}}, nil
	}
	if m := rePositions.FindStringSubmatch(sql); m != nil {
		return s.positions(m[1], m[2], tx)
	}
	if m := reCopy.FindStringSubmatch(sql); m != nil {
		if tx == nil {
			return nil, nil, fmt.Errorf("fake: tracelake copies inside a transaction; got a COPY outside one")
		}
		return s.copyInto(tx, unquote(m[1]), m[2], quotedList(m[3]), m[4] == "TRUE")
	}
	if m := reLedgerInsert.FindStringSubmatch(sql); m != nil {
		return nil, nil, s.insertLedger(tx, unquote(m[1]), m[2])
	}
	if m := reInsertPast.FindStringSubmatch(sql); m != nil {
		return nil, nil, s.insertPast(tx, unquote(m[1]), m[3], quotedList(m[4]), m[5])
	}
	if m := reCount.FindStringSubmatch(sql); m != nil {
		return s.count(tx, m)
	}
	if m := reRemove.FindStringSubmatch(sql); m != nil {
		re, err := regexp.Compile(strings.ReplaceAll(m[2], "''", "'"))
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
	return nil, nil, fmt.Errorf("fake: statement not modelled: %.120s", sql)
}

func (s *Server) endTxn(sess map[string]any) {
	delete(s.txns, fmt.Sprint(sess["fake_txn"]))
	delete(sess, "fake_txn")
	sess["txn_state"] = "AutoCommit"
}

func (s *Server) table(quoted string) (*table, error) {
	name := unquote(quoted)
	t := s.tables[name]
	if t == nil {
		return nil, fmt.Errorf("Unknown table '%s'", name)
	}
	return t, nil
}

// visible is a table's rows as the session sees them: committed rows and
// the transaction's own.
func visible(t *table, tx *txn, name string) []Row {
	rows := t.rows
	if tx != nil {
		rows = append(slices.Clone(rows), tx.rows[name]...)
	}
	return rows
}

func (s *Server) positions(ledger, topicList string, tx *txn) ([]string, [][]*string, error) {
	t, err := s.table(ledger)
	if err != nil {
		return nil, nil, err
	}
	topics := quotedList(topicList)
	type key struct {
		topic string
		part  int64
	}
	last := map[key]int64{}
	var order []key
	for _, r := range visible(t, tx, unquote(ledger)) {
		k := key{jsonString(r["topic"]), jsonInt(r["partition"])}
		if !slices.Contains(topics, k.topic) {
			continue
		}
		o := jsonInt(r["last_offset"])
		if v, ok := last[k]; !ok || o > v {
			if !ok {
				order = append(order, k)
			}
			last[k] = o
		}
	}
	var rows [][]*string
	for _, k := range order {
		rows = append(rows, []*string{str(k.topic), str(strconv.FormatInt(k.part, 10)), str(strconv.FormatInt(last[k], 10))})
	}
	return []string{"topic", "partition", "max(last_offset)"}, rows, nil
}

func (s *Server) copyInto(tx *txn, name, location string, files []string, force bool) ([]string, [][]*string, error) {
	t := s.tables[name]
	if t == nil {
		return nil, nil, fmt.Errorf("Unknown table '%s'", name)
	}
	var out [][]*string
	for _, f := range files {
		path := location + f
		hkey := name + "\x00" + path
		if !force && (s.history[hkey] || tx.history[hkey]) {
			continue // load history: already loaded
		}
		data, ok := s.stage[path]
		if !ok {
			return nil, nil, fmt.Errorf("file %s not found in stage", path)
		}
		rows, err := parseRows(t, data)
		if err != nil {
			return nil, nil, fmt.Errorf("copy %s: %w", path, err)
		}
		tx.rows[name] = append(tx.rows[name], rows...)
		tx.history[hkey] = true
		out = append(out, []*string{str(path), str(strconv.Itoa(len(rows))), str("0"), nil, nil})
	}
	return []string{"File", "Rows_loaded", "Errors_seen", "First_error", "First_error_line"}, out, nil
}

// parseRows reads NDJSON rows into t's columns, as COPY with
// MISSING_FIELD_AS = FIELD_DEFAULT would; a field the table lacks fails.
func parseRows(t *table, data []byte) ([]Row, error) {
	lines, err := readStaged(data)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(lines))
	for i, l := range lines {
		var r Row
		if err := json.Unmarshal(l, &r); err != nil {
			return nil, fmt.Errorf("line %d: not a JSON object: %w", i+1, err)
		}
		for k := range r {
			if !slices.Contains(t.cols, k) {
				return nil, fmt.Errorf("line %d: field %q is not a column of the table", i+1, k)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
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

func (s *Server) insertPast(tx *txn, name, location string, files []string, where string) error {
	t := s.tables[name]
	if t == nil {
		return fmt.Errorf("Unknown table '%s'", name)
	}
	type skip struct {
		part  int64
		topic string
		last  int64
	}
	var skips []skip
	for _, m := range reSkip.FindAllStringSubmatch(where, -1) {
		p, _ := strconv.ParseInt(m[1], 10, 64)
		l, _ := strconv.ParseInt(m[3], 10, 64)
		skips = append(skips, skip{p, strings.ReplaceAll(m[2], "''", "'"), l})
	}
	var keep []Row
	for _, f := range files {
		data, ok := s.stage[location+f]
		if !ok {
			return fmt.Errorf("file %s not found in stage", location+f)
		}
		rows, err := parseRows(t, data)
		if err != nil {
			return err
		}
	rows:
		for _, r := range rows {
			part, topic, offset := coordinates(r)
			for _, sk := range skips {
				if sk.part == part && sk.topic == topic && offset <= sk.last {
					continue rows
				}
			}
			keep = append(keep, r)
		}
	}
	s.write(tx, name, keep)
	return nil
}

// coordinates reads partition, topic and offset from a raw or a
// dead-letter row.
func coordinates(r Row) (part int64, topic string, offset int64) {
	if md, ok := r["record_metadata"]; ok {
		var m struct{ Topic string }
		_ = json.Unmarshal(md, &m)
		return jsonInt(r["kpartition"]), m.Topic, jsonInt(r["koffset"])
	}
	return jsonInt(r["partition"]), jsonString(r["topic"]), jsonInt(r["offset"])
}

func (s *Server) count(tx *txn, m []string) ([]string, [][]*string, error) {
	t, err := s.table(m[1])
	if err != nil {
		return nil, nil, err
	}
	part, _ := strconv.ParseInt(m[2], 10, 64)
	topic := strings.ReplaceAll(m[3], "''", "'")
	lo, _ := strconv.ParseInt(m[4], 10, 64)
	hi, _ := strconv.ParseInt(m[5], 10, 64)
	n := 0
	for _, r := range visible(t, tx, unquote(m[1])) {
		p, tp, o := coordinates(r)
		if p == part && tp == topic && o >= lo && o <= hi {
			n++
		}
	}
	return []string{"count(*)"}, [][]*string{{str(strconv.Itoa(n))}}, nil
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
