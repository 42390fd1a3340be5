package databend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// column is one column of a table tracelake creates, in Databend types.
type column struct {
	name, typ string
	extra     string // NULL, DEFAULT …
}

// The raw table is the reference tool's (uuid STRING … raw_data JSON …), so
// a table it created is taken over as it is. Databend's JSON is VARIANT.
var (
	rawColumns = []column{
		{"uuid", "VARCHAR", ""},
		{"koffset", "BIGINT", ""},
		{"kpartition", "INT", ""},
		{"raw_data", "VARIANT", "NULL"},
		{"record_metadata", "VARIANT", ""},
		{"add_time", "TIMESTAMP", "DEFAULT NOW()"},
	}
	// key and value hold base64 of the original bytes: NDJSON cannot carry
	// bytes that are not UTF-8, which is often why a record is here.
	dlqColumns = []column{
		{"topic", "VARCHAR", ""},
		{"partition", "INT", ""},
		{"offset", "BIGINT", ""},
		{"key", "VARCHAR", "NULL"},
		{"value", "VARCHAR", "NULL"},
		{"error", "VARCHAR", ""},
		{"stage", "VARCHAR", ""},
		{"add_time", "TIMESTAMP", "DEFAULT NOW()"},
		// The record's headers and timestamp, as its record_metadata holds
		// them (envelope.AppendDLQRow), for a replay to load the row a
		// first load would have; added to an older table at Prepare.
		{"headers", "VARIANT", "NULL"},
		{"create_time", "TIMESTAMP", "NULL"},
	}
	ledgerColumns = []column{
		{"topic", "VARCHAR", ""},
		{"partition", "INT", ""},
		{"first_offset", "BIGINT", ""},
		{"last_offset", "BIGINT", ""},
		{"records", "BIGINT", ""},
		{"dlq_records", "BIGINT", ""},
		{"load_id", "VARCHAR", ""},
		{"files", "INT", ""},
		{"loaded_at", "TIMESTAMP", ""},
		// Kafka's id of the topic the range was read from
		// (sink.Range.TopicID), checked when the partition is assigned;
		// added to an older ledger at Prepare, whose rows read NULL
		// there (not checked).
		{"topic_id", "VARCHAR", "NULL"},
	}
)

// typeNames are Databend's types of the logical types. A timestamp comes
// as microseconds since the epoch: the NDJSON reader takes an integer for
// a TIMESTAMP column by magnitude (formats field_decoder/json_ast.rs
// read_timestamp, expression utils/auto_detect_datetime.rs
// int64_to_timestamp: at or past 31,536,000,000,000 it is microseconds,
// which every time after 1971-01-01 is; an earlier one is staged as a
// string, see stageableTimes). A DOUBLE column takes JSON
// numbers only (json_ast.rs read_float), so a NaN or infinite value (the
// decoder writes them as strings) is a row Databend rejects: it goes to
// the dead-letter table with Databend's error.
var typeNames = map[schema.Type]string{
	schema.String: "VARCHAR", schema.Int32: "INT", schema.Int64: "BIGINT", schema.Float64: "DOUBLE",
	schema.Bool: "BOOLEAN", schema.Timestamp: "TIMESTAMP", schema.JSON: "VARIANT",
	// COPY reads a decimal from a JSON string exactly (expression
	// utils/serialize.rs read_decimal_from_json: read_decimal_with_size),
	// from a JSON number through a float: the rows carry strings. DESC
	// shows it as Decimal(18, 12) (utils/display.rs).
	schema.Decimal: "DECIMAL(18, 12)",
}

// typedColumns are a declared table's columns in Databend, every one
// nullable.
func typedColumns(t *schema.Table) []column {
	all := t.AllColumns()
	out := make([]column, len(all))
	for i, c := range all {
		out[i] = column{c.Name, typeNames[c.Type], "NULL"}
	}
	return out
}

// Prepare creates the raw (unless in transform mode, where the table is
// the user's and must exist), dead-letter and ledger tables if absent, and
// checks that existing tables have tracelake's columns. A declared table
// (Typed, Derived, and the dedup tables built from Typed) created by an
// older release is given the columns declared since (addColumns).
func (s *Sink) Prepare(ctx context.Context) error {
	if s.opt.StreamingLoad {
		s.log.Info("streaming_load: files go through the query node (/v1/upload_to_stage) and are loaded with COPY in the load's transaction; " +
			"Databend's /v1/streaming_load is not used because it cannot join a transaction, and a load's rows must commit with its ledger rows")
	}
	ss := s.c.session()
	type tableSpec struct {
		name, quoted string
		cols         []column
		declared     bool // a declared table's (or built from one): grows (addColumns)
		// grows: a table of tracelake's own that gained columns (the
		// dead-letter table's headers and create_time, the fence
		// table's claim): they are added to an older table, which is
		// then checked as the others are.
		grows bool
	}
	specs := []tableSpec{
		{s.opt.Table + "_dlq", s.tables.dlq, dlqColumns, false, true},
		{s.opt.Table + "_ledger", s.tables.ledger, ledgerColumns, false, true}, // topic_id came later
		// The fence table's claim column is added to an older one (see
		// claim.go): its rows read NULL there.
		{s.opt.Table + "_fence", s.tables.fence, fenceColumns, false, true},
	}
	if s.opt.Transform {
		res, err := ss.query(ctx, "DESC "+s.tables.main)
		if err != nil {
			return fmt.Errorf("transform mode loads into your table %s; describe it: %w", s.opt.Table, err)
		}
		s.userColumns = readUserColumns(res)
		// DESC shows no nullability inside a type (ARRAY(STRING) for
		// ARRAY(STRING NOT NULL) too); system.columns' type does.
		res, err = ss.query(ctx, sqltext.DatabendColumns(s.opt.Table))
		if err != nil {
			return fmt.Errorf("transform mode loads into your table %s; read its columns' types from system.columns: %w", s.opt.Table, err)
		}
		applyColumnNulls(s.userColumns, res)
		if anyRequired(s.userColumns) {
			res, err = ss.query(ctx, "SHOW CREATE TABLE "+s.tables.main)
			if err != nil {
				return fmt.Errorf("transform mode loads into your table %s; read its CREATE for its AUTOINCREMENT columns: %w", s.opt.Table, err)
			}
			autoIncremented(s.userColumns, res)
		}
	} else {
		main, typed := rawColumns, s.opt.Typed != nil
		if typed {
			main = typedColumns(s.opt.Typed)
		}
		specs = append([]tableSpec{{s.opt.Table, s.tables.main, main, typed, false}}, specs...)
		if s.opt.Derived != nil {
			specs = append(specs, tableSpec{s.opt.DerivedTable, s.tables.derived, typedColumns(s.opt.Derived), true, false})
		}
		if typed {
			for _, name := range s.opt.DedupTables {
				specs = append(specs, tableSpec{name, sqltext.Name(name), append(slices.Clone(main), column{"dedup_key", "VARCHAR", "NULL"}), true, false})
			}
		}
	}
	// The dedup target absent, its model's watermarks are reset
	// (Options.DedupReset) before the target is created, never after: a
	// start that stops between the two (killed, or a statement failing)
	// must find the target absent again at the next start, which resets
	// them then. Reset after the CREATE, the next start found the target
	// and kept the watermarks of the one dropped for good. Setup (the
	// watermark table, idempotent, none of the sink's tables needed)
	// runs first, as the reset deletes from its table.
	for _, q := range s.opt.Setup {
		if _, err := ss.query(ctx, q); err != nil {
			return fmt.Errorf("set up: %w", err)
		}
	}
	if s.opt.Typed != nil && len(s.opt.DedupTables) > 0 && len(s.opt.DedupReset) > 0 {
		resetDedup, err := absent(ctx, ss, sqltext.Name(s.opt.DedupTables[0]))
		if err != nil {
			return err
		}
		for _, q := range s.opt.DedupReset {
			if !resetDedup {
				break
			}
			if _, err := ss.query(ctx, q); err != nil {
				return fmt.Errorf("start %s, created anew, from the first row: %w", s.opt.DedupTables[0], err)
			}
		}
	}
	var errs []error
	for _, t := range specs {
		if _, err := ss.query(ctx, createTable(t.quoted, t.cols)); err != nil {
			return fmt.Errorf("create table %s: %w", t.name, err)
		}
		res, err := ss.query(ctx, "DESC "+t.quoted)
		if err != nil {
			return fmt.Errorf("describe table %s: %w", t.name, err)
		}
		if t.declared {
			errs = append(errs, s.addColumns(ctx, ss, t.name, t.quoted, t.cols, res))
			continue
		}
		if t.grows && len(diffColumns(t.cols, res)) > 0 {
			if err := s.addColumns(ctx, ss, t.name, t.quoted, t.cols, res); err != nil {
				errs = append(errs, err)
				continue
			}
			if res, err = ss.query(ctx, "DESC "+t.quoted); err != nil {
				return fmt.Errorf("describe table %s: %w", t.name, err)
			}
		}
		if diff := diffColumns(t.cols, res); len(diff) > 0 {
			errs = append(errs, fmt.Errorf("table %s exists with other columns than tracelake needs:\n  %s", t.name, strings.Join(diff, "\n  ")))
		}
	}
	return errors.Join(errs...)
}

// unknownTable is Databend's UnknownTable (common/exception
// exception_code.rs): DESC of a table that does not exist.
const unknownTable = 1025

// absent says whether the table (quoted) does not exist: DESC answers
// UnknownTable.
func absent(ctx context.Context, ss *session, table string) (bool, error) {
	_, err := ss.query(ctx, "DESC "+table)
	var ce *codeError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ce) && ce.code == unknownTable:
		return true, nil
	}
	return false, fmt.Errorf("describe table %s: %w", table, err)
}

func createTable(name string, cols []column) string {
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = strings.TrimSpace(sqltext.Ident(c.name) + " " + c.typ + " " + c.extra)
	}
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", name, strings.Join(defs, ", "))
}

// diffColumns compares the DESC output (Field, Type, …) with want, one line
// per difference.
func diffColumns(want []column, desc *result) []string {
	have := map[string]string{}
	var order []string
	for _, row := range desc.Rows {
		if len(row) < 2 || row[0] == nil || row[1] == nil {
			continue
		}
		have[*row[0]] = *row[1]
		order = append(order, *row[0])
	}
	var diff []string
	wanted := map[string]bool{}
	for _, c := range want {
		wanted[c.name] = true
		got, ok := have[c.name]
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("column %s is missing (want %s)", c.name, c.typ))
		case baseType(got) != c.typ:
			diff = append(diff, fmt.Sprintf("column %s is %s, want %s", c.name, got, c.typ))
		}
	}
	for _, name := range order {
		if !wanted[name] {
			diff = append(diff, fmt.Sprintf("column %s is not one of tracelake's", name))
		}
	}
	return diff
}

// baseType reduces a Databend type name to the names tracelake creates:
// nullability and aliases (STRING, JSON, INT32 …) do not matter.
func baseType(t string) string {
	t = strings.ToUpper(strings.TrimSpace(t))
	if strings.HasPrefix(t, "NULLABLE(") && strings.HasSuffix(t, ")") {
		t = t[len("NULLABLE(") : len(t)-1]
	}
	t = strings.TrimSuffix(t, " NULL")
	switch t {
	case "STRING", "TEXT":
		return "VARCHAR"
	case "JSON":
		return "VARIANT"
	case "INT32", "INTEGER", "SIGNED":
		return "INT"
	case "INT64":
		return "BIGINT"
	case "DATETIME":
		return "TIMESTAMP"
	}
	return t
}

// presigned reads PRESIGN UPLOAD's one row: method, headers (JSON), url.
func presigned(res *result) (method string, header map[string]string, url string, err error) {
	if len(res.Rows) != 1 || len(res.Rows[0]) < 3 || res.Rows[0][0] == nil || res.Rows[0][2] == nil {
		return "", nil, "", fmt.Errorf("PRESIGN UPLOAD answered %d rows; want one row of method, headers and url", len(res.Rows))
	}
	row := res.Rows[0]
	header = map[string]string{}
	if row[1] != nil && *row[1] != "" {
		if err := json.Unmarshal([]byte(*row[1]), &header); err != nil {
			return "", nil, "", fmt.Errorf("PRESIGN UPLOAD headers are not a JSON object: %w", err)
		}
	}
	return strings.ToUpper(*row[0]), header, *row[2], nil
}
