package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Column is a table column with DuckDB's name for its type.
type Column struct{ Name, Type string }

// The contract tables (DESIGN.md). Changing them breaks users' queries.
var (
	rawColumns = []Column{
		{"uuid", "VARCHAR"}, {"koffset", "BIGINT"}, {"kpartition", "INTEGER"},
		{"raw_data", "JSON"}, {"record_metadata", "JSON"}, {"add_time", "TIMESTAMP"},
	}
	// headers and create_time are the record's, as its record_metadata
	// holds them, so that a replay loads the row a first load would have
	// (a tenant sent as a header, the record's time). They came after the
	// first release: a dead-letter table without them gets them added at
	// Prepare, and its older rows read NULL there.
	dlqColumns = []Column{
		{"topic", "VARCHAR"}, {"partition", "INTEGER"}, {"offset", "BIGINT"},
		{"key", "BLOB"}, {"value", "BLOB"}, {"error", "VARCHAR"}, {"stage", "VARCHAR"},
		{"add_time", "TIMESTAMP"}, {"headers", "JSON"}, {"create_time", "TIMESTAMP"},
	}
	ledgerColumns = []Column{
		{"topic", "VARCHAR"}, {"partition", "INTEGER"}, {"first_offset", "BIGINT"},
		{"last_offset", "BIGINT"}, {"records", "BIGINT"}, {"dlq_records", "BIGINT"},
		{"load_id", "VARCHAR"}, {"files", "INTEGER"}, {"loaded_at", "TIMESTAMP"},
		// topic_id is Kafka's id of the topic the range was read from
		// (sink.Range.TopicID), checked when the partition is assigned. It
		// came later: a ledger without it gets it added at Prepare, and
		// its older rows read NULL there (not checked).
		{"topic_id", "VARCHAR"},
	}
)

// RawColumns and DLQColumns are the contract tables' columns, for code that
// builds the same tables elsewhere (tracelake sql over Iceberg).
func RawColumns() []Column { return slices.Clone(rawColumns) }

// DLQColumns: see RawColumns.
func DLQColumns() []Column { return slices.Clone(dlqColumns) }

// typeNames are DuckDB's names of the logical types.
var typeNames = map[schema.Type]string{
	schema.String: "VARCHAR", schema.Int32: "INTEGER", schema.Int64: "BIGINT", schema.Float64: "DOUBLE",
	schema.Bool: "BOOLEAN", schema.Timestamp: "TIMESTAMP", schema.JSON: "JSON", schema.Decimal: "DECIMAL(18,12)",
}

// TypedColumns are a declared table's columns in DuckDB.
func TypedColumns(t *schema.Table) []Column {
	all := t.AllColumns()
	out := make([]Column, len(all))
	for i, c := range all {
		out[i] = Column{c.Name, typeNames[c.Type]}
	}
	return out
}

// Prepare creates the raw (raw mode), dead-letter and ledger tables if absent,
// and checks that existing ones have exactly the expected columns. A
// declared table (Typed, Derived) is created, or given the columns a
// newer release declares (ensureDeclared). In transform mode the user's
// table must exist; its columns are read for loads.
func (s *Sink) Prepare(ctx context.Context) error {
	var errs []error
	if s.opt.Transform {
		errs = append(errs, s.readUserTable(ctx, s.db))
	} else if s.opt.Typed != nil {
		errs = append(errs, s.ensureDeclared(ctx, s.opt.Table, s.opt.Typed))
		if s.opt.Derived != nil {
			errs = append(errs, s.ensureDeclared(ctx, s.opt.DerivedTable, s.opt.Derived))
		}
	} else if s.opt.Routed {
		if err := errors.Join(s.ensureGrown(ctx, s.opt.Table+"_routes", routesColumns), s.ensure(ctx, s.opt.Table+RoutesReached, reachedColumns),
			s.ensure(ctx, s.opt.Table+RoutesSchemaTopics, schemaTopicsColumns),
			s.ensureGrown(ctx, s.opt.Table+Landing, landingColumns)); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, s.readRouted(ctx))
		}
	} else {
		rawJSON, err := s.rawJSONStorage(ctx)
		s.rawJSON = rawJSON
		errs = append(errs, err)
		if err == nil {
			errs = append(errs, s.ensure(ctx, s.opt.Table, rawColumns))
		}
	}
	errs = append(errs, s.ensureGrown(ctx, s.opt.Table+"_dlq", dlqColumns), s.ensureGrown(ctx, s.opt.Table+"_ledger", ledgerColumns))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.CleanStage()
}

// ensure creates table with want, or reports every column that differs.
func (s *Sink) ensure(ctx context.Context, table string, want []Column) error {
	have, err := TableColumns(ctx, s.db, table)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		defs := make([]string, len(want))
		for i, c := range want {
			defs[i] = sqltext.Ident(c.Name) + " " + c.Type
			switch {
			case table == s.opt.Table+Landing:
				// The landing table's rows stay until the next move: DuckDB
				// compressing them at a checkpoint would be work thrown away.
				defs[i] += " USING COMPRESSION uncompressed"
			case c.Type == "JSON":
				defs[i] += s.jsonStorage(table)
			}
		}
		if schema, _, ok := strings.Cut(table, "."); ok {
			if _, err := s.db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+sqltext.Ident(schema)); err != nil {
				return fmt.Errorf("create schema %s: %w", schema, err)
			}
		}
		q := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", sqltext.Name(table), strings.Join(defs, ", "))
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create table %s: %w", table, err)
		}
		return nil
	}
	if diff := diffColumns(have, want); len(diff) > 0 {
		return fmt.Errorf("table %s exists with another schema: %s", table, strings.Join(diff, "; "))
	}
	return nil
}

// diffColumns lists, in the order of want, what differs between the columns
// a table has and the ones tracelake needs.
func diffColumns(have, want []Column) []string {
	got := make(map[string]string, len(have))
	for _, c := range have {
		got[c.Name] = c.Type
	}
	var diff []string
	for _, c := range want {
		typ, ok := got[c.Name]
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("column %s is missing (want %s)", c.Name, c.Type))
		case typ != c.Type:
			diff = append(diff, fmt.Sprintf("column %s is %s, want %s", c.Name, typ, c.Type))
		}
		delete(got, c.Name)
	}
	for _, c := range have {
		if _, extra := got[c.Name]; extra {
			diff = append(diff, fmt.Sprintf("column %s (%s) is not expected", c.Name, c.Type))
		}
	}
	return diff
}

// Querier is a database or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// TableColumns returns the columns of table ("schema.table", or "table" in
// schema main) in order; none if the table does not exist. It looks the
// one table up (pragma_table_info), where information_schema.columns
// lists every column of every table first: 0.6 ms against 56 ms in a
// database of 3,000 tables, which database change capture makes.
func TableColumns(ctx context.Context, q Querier, table string) ([]Column, error) {
	schema, name := splitTable(table)
	rows, err := q.QueryContext(ctx, `SELECT name, type FROM pragma_table_info(?) ORDER BY cid`, schema+"."+name)
	if err != nil {
		if IsMissing(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", table, err)
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// ColumnDefaults returns the defaults of table's columns that have one
// (name → the default's SQL), none for a table that does not exist.
func ColumnDefaults(ctx context.Context, q Querier, table string) (map[string]string, error) {
	schema, name := splitTable(table)
	rows, err := q.QueryContext(ctx, `SELECT name, dflt_value FROM pragma_table_info(?) WHERE dflt_value IS NOT NULL`, schema+"."+name)
	if err != nil {
		if IsMissing(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read column defaults of %s: %w", table, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var c, def string
		if err := rows.Scan(&c, &def); err != nil {
			return nil, fmt.Errorf("read column defaults of %s: %w", table, err)
		}
		out[c] = def
	}
	return out, rows.Err()
}

// IsMissing says whether err is DuckDB's for a table (or schema) that
// does not exist.
func IsMissing(err error) bool {
	var de *duckdbdriver.Error
	return errors.As(err, &de) && de.Type == duckdbdriver.ErrorTypeCatalog && strings.Contains(de.Msg, "does not exist")
}

// Positions returns the next offset to read per partition from the ledger.
func (s *Sink) Positions(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	positions, _, err := s.readLedger(ctx, parts, false)
	return positions, err
}

// TopicIDs returns the topic id recorded with each partition's furthest
// ledger row that has one (sink.TopicIDKeeper).
func (s *Sink) TopicIDs(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]string, error) {
	_, ids, err := s.readLedger(ctx, parts, true)
	return ids, err
}

// PositionsAndTopicIDs is Positions and TopicIDs in one read of the
// ledger (sink.LedgerReader), as a group's assignment wants both.
func (s *Sink) PositionsAndTopicIDs(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, map[sink.TopicPartition]string, error) {
	return s.readLedger(ctx, parts, true)
}

// readLedger reads the next offset of each of parts the ledger knows and,
// with ids, the topic id recorded with its furthest row that has one, in
// one query of those partitions' rows: a query of the whole ledger for
// each, filtered in Go, read every partition's rows twice at each
// assignment, the ledger growing by a row a load.
func (s *Sink) readLedger(ctx context.Context, parts []sink.TopicPartition, ids bool) (map[sink.TopicPartition]int64, map[sink.TopicPartition]string, error) {
	positions, recorded := make(map[sink.TopicPartition]int64, len(parts)), map[sink.TopicPartition]string{}
	if len(parts) == 0 {
		return positions, recorded, nil
	}
	idCol := "NULL"
	if ids {
		// verify opens the database without Prepare: a ledger an older
		// release made has no topic_id until a run of this release opens
		// it, and recorded no id, as its rows in a ledger grown since.
		cols, err := TableColumns(ctx, s.db, s.opt.Table+"_ledger")
		if err != nil {
			return nil, nil, fmt.Errorf("read topic ids from %s: %w", s.tables.ledger, err)
		}
		if slices.ContainsFunc(cols, func(c Column) bool { return c.Name == "topic_id" }) {
			idCol = "arg_max(l.topic_id, l.last_offset) FILTER (WHERE l.topic_id IS NOT NULL)"
		}
	}
	var values strings.Builder
	args := make([]any, 0, 2*len(parts))
	for i, tp := range parts {
		if i > 0 {
			values.WriteString(", ")
		}
		fmt.Fprintf(&values, "($%d, $%d::INTEGER)", 2*i+1, 2*i+2)
		args = append(args, tp.Topic, tp.Partition)
	}
	q := fmt.Sprintf(`SELECT l.topic, l."partition", max(l.last_offset), %s FROM %s l
		JOIN (VALUES %s) AS want(topic, "partition") ON l.topic = want.topic AND l."partition" = want."partition"
		GROUP BY l.topic, l."partition"`, idCol, s.tables.ledger, values.String())
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read positions from %s: %w", s.tables.ledger, err)
	}
	defer rows.Close()
	for rows.Next() {
		var tp sink.TopicPartition
		var last int64
		var id sql.NullString
		if err := rows.Scan(&tp.Topic, &tp.Partition, &last, &id); err != nil {
			return nil, nil, fmt.Errorf("read positions from %s: %w", s.tables.ledger, err)
		}
		positions[tp] = last + 1
		if id.Valid {
			recorded[tp] = id.String
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read positions from %s: %w", s.tables.ledger, err)
	}
	return positions, recorded, nil
}

// splitTable splits "schema.table" (or "table", in schema main).
func splitTable(table string) (schema, name string) {
	if schema, name, ok := strings.Cut(table, "."); ok {
		return schema, name
	}
	return "main", table
}
