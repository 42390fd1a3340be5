package flightsql

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tracelake/tracelake/internal/query"
)

// The metadata calls list one catalog holding one schema holding the
// tables the caller's scope may read (Reader.Tables), all of type TABLE.
// Their tickets are the commands themselves: they carry no scope, and
// DoGet lists what its own caller may read.

const tableType = "TABLE"

func (h *handler) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.Catalogs), nil
}

func (h *handler) DoGetCatalogs(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(alloc, schema_ref.Catalogs)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(h.catalog)
	return one(b)
}

func (h *handler) GetFlightInfoSchemas(_ context.Context, _ afsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.DBSchemas), nil
}

func (h *handler) DoGetDBSchemas(_ context.Context, cmd afsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(alloc, schema_ref.DBSchemas)
	defer b.Release()
	ok, err := h.inSchema(cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	if ok {
		b.Field(0).(*array.StringBuilder).Append(h.catalog)
		b.Field(1).(*array.StringBuilder).Append(h.dbSchema)
	}
	return one(b)
}

func (h *handler) GetFlightInfoTables(_ context.Context, cmd afsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), tablesSchema(cmd)), nil
}

func tablesSchema(cmd afsql.GetTables) *arrow.Schema {
	if cmd.GetIncludeSchema() {
		return schema_ref.TablesWithIncludedSchema
	}
	return schema_ref.Tables
}

func (h *handler) DoGetTables(ctx context.Context, cmd afsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	sc, err := h.scope(ctx)
	if err != nil {
		return nil, nil, err
	}
	schema := tablesSchema(cmd)
	b := array.NewRecordBuilder(alloc, schema)
	defer b.Release()
	ok, err := h.inSchema(cmd.GetCatalog(), cmd.GetDBSchemaFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	if types := cmd.GetTableTypes(); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, tableType) }) {
		ok = false
	}
	if !ok {
		return one(b)
	}
	name, err := pattern(cmd.GetTableNameFilterPattern())
	if err != nil {
		return nil, nil, err
	}
	tables, err := h.reader.Tables(ctx, sc)
	if err != nil {
		return nil, nil, h.fail(ctx, "DoGetTables", err)
	}
	tables = slices.Clone(tables)
	slices.SortFunc(tables, func(a, b query.Table) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tables {
		if name != nil && !name.MatchString(t.Name) {
			continue
		}
		b.Field(0).(*array.StringBuilder).Append(h.catalog)
		b.Field(1).(*array.StringBuilder).Append(h.dbSchema)
		b.Field(2).(*array.StringBuilder).Append(t.Name)
		b.Field(3).(*array.StringBuilder).Append(tableType)
		if cmd.GetIncludeSchema() {
			b.Field(4).(*array.BinaryBuilder).Append(flight.SerializeSchema(t.Schema, alloc))
		}
	}
	return one(b)
}

func (h *handler) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.TableTypes), nil
}

func (h *handler) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(alloc, schema_ref.TableTypes)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(tableType)
	return one(b)
}

// inSchema says whether the one schema is asked for: catalog nil is any
// catalog, "" only what has none (nothing here), else the catalog's name;
// the schema pattern is a LIKE pattern, nil for any.
func (h *handler) inSchema(catalog, schemaPattern *string) (bool, error) {
	if catalog != nil && *catalog != h.catalog {
		return false, nil
	}
	p, err := pattern(schemaPattern)
	if err != nil {
		return false, err
	}
	return p == nil || p.MatchString(h.dbSchema), nil
}

// pattern compiles a LIKE pattern of the metadata calls: % any run, _
// any one character, \ escapes the next one. Nil for a nil pattern.
func pattern(p *string) (*regexp.Regexp, error) {
	if p == nil {
		return nil, nil
	}
	var re strings.Builder
	re.WriteString(`(?s)^`)
	escaped := false
	for _, r := range *p {
		switch {
		case escaped:
			re.WriteString(regexp.QuoteMeta(string(r)))
			escaped = false
		case r == '\\':
			escaped = true
		case r == '%':
			re.WriteString(`.*`)
		case r == '_':
			re.WriteString(`.`)
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if escaped {
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "filter pattern %q ends with an escape", *p)
	}
	re.WriteString(`$`)
	return regexp.Compile(re.String())
}

// one is a stream of the one batch b holds.
func one(b *array.RecordBuilder) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	rec := b.NewRecordBatch()
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return rec.Schema(), ch, nil
}

// The key calls: the tables declare no primary or foreign key, so each
// answers no row, in the schema Flight SQL gives it. JDBC tools ask them
// for every table they show (DatabaseMetaData.getPrimaryKeys and the
// rest), and take Unimplemented for a table that failed to load. The
// caller's tenant is checked as for every call.

func (h *handler) GetFlightInfoPrimaryKeys(_ context.Context, _ afsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.PrimaryKeys), nil
}

func (h *handler) DoGetPrimaryKeys(ctx context.Context, _ afsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return h.noKeys(ctx, schema_ref.PrimaryKeys)
}

func (h *handler) GetFlightInfoImportedKeys(_ context.Context, _ afsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.ImportedKeys), nil
}

func (h *handler) DoGetImportedKeys(ctx context.Context, _ afsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return h.noKeys(ctx, schema_ref.ImportedKeys)
}

func (h *handler) GetFlightInfoExportedKeys(_ context.Context, _ afsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.ExportedKeys), nil
}

func (h *handler) DoGetExportedKeys(ctx context.Context, _ afsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return h.noKeys(ctx, schema_ref.ExportedKeys)
}

func (h *handler) GetFlightInfoCrossReference(_ context.Context, _ afsql.CrossTableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.CrossReference), nil
}

func (h *handler) DoGetCrossReference(ctx context.Context, _ afsql.CrossTableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return h.noKeys(ctx, schema_ref.CrossReference)
}

// noKeys is a key call's answer: no row of schema, once the caller's
// tenant is one it may read.
func (h *handler) noKeys(ctx context.Context, schema *arrow.Schema) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	if _, err := h.scope(ctx); err != nil {
		return nil, nil, err
	}
	b := array.NewRecordBuilder(alloc, schema)
	defer b.Release()
	return one(b)
}
