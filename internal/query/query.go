// Package query is tracelake's one read path: it answers read-only SQL
// over the declared tables for a caller's scope (one tenant, or every
// tenant for the operator) as a stream of Arrow record batches. The
// Flight SQL server, the Grafana APIs and the commands that read a
// running process's database all read through it.
package query

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Reader answers queries for a scope.
type Reader interface {
	// Query runs one SELECT with its parameters ($1 or ? placeholders)
	// and streams the result; the caller releases the reader, which
	// frees what the query holds.
	Query(ctx context.Context, s tenancy.Scope, sql string, params ...any) (array.RecordReader, error)
	// Schema is the schema Query would answer for sql, without running it.
	Schema(ctx context.Context, s tenancy.Scope, sql string) (*arrow.Schema, error)
	// Tables lists the tables the scope may read, with their columns.
	Tables(ctx context.Context, s tenancy.Scope) ([]Table, error)
}

// Decimal is a DECIMAL parameter of Reader.Query: Value × 10^-Scale, in
// at most Width digits (at most 38, DuckDB's widest). It binds as the
// DECIMAL it is: a decimal's text would be cast to the type DuckDB infers
// for its placeholder (4.5 to a BIGINT column's 5).
type Decimal struct {
	Width, Scale uint8
	Value        decimal128.Num
}

// String is the decimal's exact text.
func (d Decimal) String() string { return d.Value.ToString(int32(d.Scale)) }

// Table is a table a scope may read.
type Table struct {
	Name   string
	Schema *arrow.Schema
}

// RefusedError is a query refused before it ran: not a single SELECT, or
// one that reads what its scope may not (a table it was not given, a
// file, a setting), or that DuckDB refused for the caller's reasons (a
// column that does not exist). Protocols answer it as the caller's error
// (InvalidArgument / 400), never as the server's.
type RefusedError struct {
	Reason string
	// Engine says DuckDB refused the query as it would anywhere (a
	// column that does not exist, a value that does not convert), not
	// the read path's rules of what a caller may read.
	Engine bool
	// syntax: DuckDB's parser did not read the query (session.parserError
	// makes it DuckDB's own error for it).
	syntax bool
}

func (e *RefusedError) Error() string { return "query refused: " + e.Reason }

// TenantIs is the SQL condition that a row whose tenant_id is the value
// of expr is tenant's: its tenant_id read as text is the id, byte for
// byte. Compared as it is, a tenant_id of another type than VARCHAR (a
// model's INTEGER, a UUID, a BOOLEAN) was compared with the id cast to
// its type, and tenant "01" read tenant "1"'s rows, "A0EE…" those of
// "a0ee…", "t" those of "true". On a VARCHAR, DuckDB binds no cast: the
// filter still prunes by the column's statistics. The comparison is
// binary whatever collation the column (a user's table, VARCHAR COLLATE
// NOCASE) or the database (default_collation) has: under theirs tenant
// acme read ACME's rows, and a those of á. DuckDB still pushes it into
// the scan as a plain comparison.
func TenantIs(expr, tenant string) string {
	return "CAST(" + expr + ` AS VARCHAR) COLLATE "binary" = ` + sqltext.String(tenant)
}
