package flightsql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
)

// GetInfo through ADBC: the server's name and version, SQL yes,
// Substrait no.
func TestInfo(t *testing.T) {
	_, s, _ := setup(t)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	rdr, err := c.GetInfo(context.Background(), []adbc.InfoCode{
		adbc.InfoVendorName, adbc.InfoVendorVersion, adbc.InfoVendorSql, adbc.InfoVendorSubstrait, adbc.InfoVendorArrowVersion})
	if err != nil {
		t.Fatal(err)
	}
	got := infoValues(t, rdr)
	want := map[uint32]any{
		uint32(adbc.InfoVendorName):         "tracelake",
		uint32(adbc.InfoVendorVersion):      "1.2.3",
		uint32(adbc.InfoVendorSql):          true,
		uint32(adbc.InfoVendorSubstrait):    false,
		uint32(adbc.InfoVendorArrowVersion): arrow.PkgVersion,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("info %d: %v, want %v", k, got[k], v)
		}
	}
}

// GetSqlInfo answers read-only, no transactions, and every key asked for
// at once (the JDBC driver asks for them all: one unknown key fails the
// whole call).
func TestSQLInfo(t *testing.T) {
	_, _, c := setup(t)
	ctx := as("a", "tok-a")
	info, err := c.GetSqlInfo(ctx, []afsql.SqlInfo{afsql.SqlInfoFlightSqlServerReadOnly, afsql.SqlInfoFlightSqlServerTransaction, afsql.SqlInfoTransactionsSupported})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	got := infoValues(t, rdr)
	if got[uint32(afsql.SqlInfoFlightSqlServerReadOnly)] != true || got[uint32(afsql.SqlInfoTransactionsSupported)] != false ||
		got[uint32(afsql.SqlInfoFlightSqlServerTransaction)] != int32(afsql.SqlTransactionNone) {
		t.Errorf("read-only, transactions: %v", got)
	}

	var every []afsql.SqlInfo
	for id := range pb.SqlInfo_name {
		if id < 1000 { // the keys the spec defines; 10,000 and up are vendors'
			every = append(every, afsql.SqlInfo(id))
		}
	}
	info, err = c.GetSqlInfo(ctx, every)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err = c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if got := infoValues(t, rdr); len(got) != len(every) {
		t.Errorf("%d of the %d keys answered", len(got), len(every))
	}
}

// infoValues reads a GetInfo or GetSqlInfo answer: code → value.
func infoValues(t *testing.T, rdr array.RecordReader) map[uint32]any {
	t.Helper()
	defer rdr.Release()
	got := map[uint32]any{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		codes := rec.Column(0).(*array.Uint32)
		values := rec.Column(1).(*array.DenseUnion)
		for i := range int(rec.NumRows()) {
			got[codes.Value(i)] = values.Field(values.ChildID(i)).GetOneForMarshal(int(values.ValueOffset(i)))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// catalog is GetObjects' answer, decoded from its JSON form.
type catalog struct {
	Name    string `json:"catalog_name"`
	Schemas []struct {
		Name   string `json:"db_schema_name"`
		Tables []struct {
			Name    string `json:"table_name"`
			Type    string `json:"table_type"`
			Columns []struct {
				Name string `json:"column_name"`
				Pos  int    `json:"ordinal_position"`
			} `json:"table_columns"`
		} `json:"db_schema_tables"`
	} `json:"catalog_db_schemas"`
}

// objects lists c's objects as "catalog.schema.table(column,…)".
func objects(t *testing.T, c adbc.Connection, table *string) []string {
	t.Helper()
	rdr, err := c.GetObjects(context.Background(), adbc.ObjectDepthAll, nil, nil, table, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var buf bytes.Buffer
	for rdr.Next() {
		if err := array.RecordToJSON(rdr.RecordBatch(), &buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	var out []string
	dec := json.NewDecoder(&buf)
	for {
		var cat catalog
		if err := dec.Decode(&cat); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for _, s := range cat.Schemas {
			for _, tb := range s.Tables {
				var cols []string
				for _, col := range tb.Columns {
					cols = append(cols, col.Name)
				}
				out = append(out, cat.Name+"."+s.Name+"."+tb.Name+"("+strings.Join(cols, ",")+")")
			}
		}
	}
	return out
}

// GetObjects lists the caller's tables with their columns, in the one
// catalog and schema; a table name pattern filters them.
func TestObjects(t *testing.T) {
	_, s, _ := setup(t)
	uri := "grpc+tcp://" + s.Addr
	tenant := adbcConn(t, uri, "a", "tok-a", nil)
	if got, want := objects(t, tenant, nil), []string{"tracelake.main.spans(name,n)"}; !slices.Equal(got, want) {
		t.Errorf("tenant a's objects %v, want %v", got, want)
	}
	op := adbcConn(t, uri, "", "tok-op", nil)
	if got, want := objects(t, op, nil), []string{"tracelake.main.positions(partition,offset)", "tracelake.main.spans(name,n)"}; !slices.Equal(got, want) {
		t.Errorf("operator's objects %v, want %v", got, want)
	}
	pos := "pos%"
	if got, want := objects(t, op, &pos), []string{"tracelake.main.positions(partition,offset)"}; !slices.Equal(got, want) {
		t.Errorf("objects like %q: %v, want %v", pos, got, want)
	}
}

// GetTableSchema is the Reader's schema of the table; a table the scope
// may not read is not found.
func TestTableSchema(t *testing.T) {
	_, s, _ := setup(t)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	got, err := c.GetTableSchema(context.Background(), nil, nil, "spans")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(spansSchema) {
		t.Errorf("schema %v, want %v", got, spansSchema)
	}
	var ae adbc.Error
	if _, err := c.GetTableSchema(context.Background(), nil, nil, "positions"); !errors.As(err, &ae) || ae.Code != adbc.StatusNotFound {
		t.Errorf("tenant a's schema of positions: %v, want not found", err)
	}
}

// Table types: TABLE alone.
func TestTableTypes(t *testing.T) {
	_, s, _ := setup(t)
	c := adbcConn(t, "grpc+tcp://"+s.Addr, "a", "tok-a", nil)
	rdr, err := c.GetTableTypes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := column(t, rdr, 0); !slices.Equal(got, []string{"TABLE"}) {
		t.Errorf("table types %v", got)
	}
}

// The metadata filters: catalog exact, schema and table LIKE patterns,
// table types.
func TestTablesFilters(t *testing.T) {
	_, _, c := setup(t)
	ctx := as("", "tok-op")
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		opts *afsql.GetTablesOpts
		want []string
	}{
		{"all", &afsql.GetTablesOpts{}, []string{"positions", "spans"}},
		{"catalog", &afsql.GetTablesOpts{Catalog: str("tracelake")}, []string{"positions", "spans"}},
		{"other catalog", &afsql.GetTablesOpts{Catalog: str("other")}, nil},
		{"no catalog", &afsql.GetTablesOpts{Catalog: str("")}, nil},
		{"schema pattern", &afsql.GetTablesOpts{DbSchemaFilterPattern: str("m_i%")}, []string{"positions", "spans"}},
		{"other schema", &afsql.GetTablesOpts{DbSchemaFilterPattern: str("public")}, nil},
		{"table pattern", &afsql.GetTablesOpts{TableNameFilterPattern: str("%an_")}, []string{"spans"}},
		{"table exact", &afsql.GetTablesOpts{TableNameFilterPattern: str("spans")}, []string{"spans"}},
		{"types", &afsql.GetTablesOpts{TableTypes: []string{"VIEW", "table"}}, []string{"positions", "spans"}},
		{"other types", &afsql.GetTablesOpts{TableTypes: []string{"VIEW"}}, nil},
	} {
		info, err := c.GetTables(ctx, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := fetchColumn(ctx, t, c, info, 2); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// GetXdbcTypeInfo lists the engine's types, or those of one data type.
func TestXdbcTypeInfo(t *testing.T) {
	_, _, c := setup(t)
	ctx := as("a", "tok-a")
	names := func(dataType *int32) []string {
		t.Helper()
		info, err := c.GetXdbcTypeInfo(ctx, dataType)
		if err != nil {
			t.Fatal(err)
		}
		return fetchColumn(ctx, t, c, info, 0)
	}
	if all := names(nil); len(all) != len(xdbcTypes) || !slices.Contains(all, "VARCHAR") || !slices.Contains(all, "TIMESTAMP") {
		t.Errorf("types %v", all)
	}
	ts := int32(pb.XdbcDataType_XDBC_TIMESTAMP)
	if got := names(&ts); !slices.Equal(got, []string{"TIMESTAMP", "TIMESTAMP WITH TIME ZONE"}) {
		t.Errorf("timestamp types %v", got)
	}
}

// The key calls JDBC's DatabaseMetaData makes when a tool browses a table
// (getPrimaryKeys, getImportedKeys, getExportedKeys, getCrossReference)
// are answered, with no key: the tables declare none. A tool that gets
// Unimplemented shows the table as failed to load.
func TestKeysAreAnsweredEmpty(t *testing.T) {
	_, _, c := setup(t)
	ctx := as("a", "tok-a")
	spans := afsql.TableRef{Table: "spans"}
	for name, get := range map[string]func() (*flight.FlightInfo, error){
		"primary":  func() (*flight.FlightInfo, error) { return c.GetPrimaryKeys(ctx, spans) },
		"imported": func() (*flight.FlightInfo, error) { return c.GetImportedKeys(ctx, spans) },
		"exported": func() (*flight.FlightInfo, error) { return c.GetExportedKeys(ctx, spans) },
		"crossing": func() (*flight.FlightInfo, error) {
			return c.GetCrossReference(ctx, spans, afsql.TableRef{Table: "positions"})
		},
	} {
		info, err := get()
		if err != nil {
			t.Errorf("%s keys: %v", name, err)
			continue
		}
		if got := fetchColumn(ctx, t, c, info, 0); len(got) != 0 {
			t.Errorf("%s keys: %v, want none", name, got)
		}
	}
}

// GetXdbcTypeInfo tells TIMESTAMP WITH TIME ZONE from TIMESTAMP: both are
// XDBC_TIMESTAMP, so the datetime subcode is what says which holds an
// instant (XDBC_SUBCODE_TIMESTAMP_WITH_TIMEZONE) and which a wall-clock
// time (XDBC_SUBCODE_TIMESTAMP); the zoned row said it was a plain one.
func TestXdbcTypeInfoSubcodesTellZonedTimestamps(t *testing.T) {
	_, _, c := setup(t)
	ctx := as("a", "tok-a")
	ts := int32(pb.XdbcDataType_XDBC_TIMESTAMP)
	info, err := c.GetXdbcTypeInfo(ctx, &ts)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	subcodes := map[string]string{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		i := rec.Schema().FieldIndices("datetime_subcode")[0]
		for r := range int(rec.NumRows()) {
			subcodes[rec.Column(0).ValueStr(r)] = rec.Column(i).ValueStr(r)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"TIMESTAMP":                fmt.Sprint(int32(pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIMESTAMP)),
		"TIMESTAMP WITH TIME ZONE": fmt.Sprint(int32(pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIMESTAMP_WITH_TIMEZONE)),
	}
	if !maps.Equal(subcodes, want) {
		t.Errorf("datetime subcodes %v, want %v", subcodes, want)
	}
}
