package flightsql

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
)

// sqlInfo is what GetSqlInfo answers: every key a client asks for must be
// here, or the embedded BaseServer answers the whole call NotFound (ADBC
// asks for the Substrait versions, JDBC's DatabaseMetaData for most of
// the SQL keys). The value's Go type picks the union member the spec
// gives the key: string, bool, int64 (limits), int32 (ordinals and
// bitmasks), []string, map[int32][]int32.
func sqlInfo(version string) map[afsql.SqlInfo]any {
	bits := func(vs ...int32) int32 {
		var m int32
		for _, v := range vs {
			m |= 1 << v
		}
		return m
	}
	return map[afsql.SqlInfo]any{
		// The server.
		afsql.SqlInfoFlightSqlServerName:                        "tracelake",
		afsql.SqlInfoFlightSqlServerVersion:                     version,
		afsql.SqlInfoFlightSqlServerArrowVersion:                arrow.PkgVersion,
		afsql.SqlInfoFlightSqlServerReadOnly:                    true,
		afsql.SqlInfoFlightSqlServerSql:                         true,
		afsql.SqlInfoFlightSqlServerSubstrait:                   false,
		afsql.SqlInfoFlightSqlServerSubstraitMinVersion:         "",
		afsql.SqlInfoFlightSqlServerSubstraitMaxVersion:         "",
		afsql.SqlInfoFlightSqlServerTransaction:                 int32(afsql.SqlTransactionNone),
		afsql.SqlInfoFlightSqlServerCancel:                      false,
		afsql.SqlInfoFlightSqlServerBulkIngestion:               false,
		afsql.SqlInfoFlightSqlServerIngestTransactionsSupported: false,
		afsql.SqlInfoFlightSqlServerStatementTimeout:            int32(0),
		afsql.SqlInfoFlightSqlServerTransactionTimeout:          int32(0),

		// SQL syntax (DuckDB's).
		afsql.SqlInfoDDLCatalog:                             false,
		afsql.SqlInfoDDLSchema:                              false,
		afsql.SqlInfoDDLTable:                               false,
		afsql.SqlInfoIdentifierCase:                         int32(afsql.SqlCaseSensitivityCaseInsensitive),
		afsql.SqlInfoIdentifierQuoteChar:                    `"`,
		afsql.SqlInfoQuotedIdentifierCase:                   int32(afsql.SqlCaseSensitivityCaseInsensitive),
		afsql.SqlInfoAllTablesAreASelectable:                true,
		afsql.SqlInfoNullOrdering:                           int32(afsql.SqlNullOrderingSortAtEnd),
		afsql.SqlInfoKeywords:                               []string{},
		afsql.SqlInfoNumericFunctions:                       []string{},
		afsql.SqlInfoStringFunctions:                        []string{},
		afsql.SqlInfoSystemFunctions:                        []string{},
		afsql.SqlInfoDateTimeFunctions:                      []string{},
		afsql.SqlInfoSearchStringEscape:                     `\`,
		afsql.SqlInfoExtraNameChars:                         "",
		afsql.SqlInfoSupportsColumnAliasing:                 true,
		afsql.SqlInfoNullPlusNullIsNull:                     true,
		afsql.SqlInfoSupportsConvert:                        map[int32][]int32{},
		afsql.SqlInfoSupportsTableCorrelationNames:          true,
		afsql.SqlInfoSupportsDifferentTableCorrelationNames: false,
		afsql.SqlInfoSupportsExpressionsInOrderBy:           true,
		afsql.SqlInfoSupportsOrderByUnrelated:               true,
		afsql.SqlInfoSupportedGroupBy:                       bits(int32(pb.SqlSupportedGroupBy_SQL_GROUP_BY_UNRELATED), int32(pb.SqlSupportedGroupBy_SQL_GROUP_BY_BEYOND_SELECT)),
		afsql.SqlInfoSupportsLikeEscapeClause:               true,
		afsql.SqlInfoSupportsNonNullableColumns:             true,
		afsql.SqlInfoSupportedGrammar:                       bits(int32(pb.SupportedSqlGrammar_SQL_MINIMUM_GRAMMAR), int32(pb.SupportedSqlGrammar_SQL_CORE_GRAMMAR)),
		afsql.SqlInfoANSI92SupportedLevel:                   bits(int32(pb.SupportedAnsi92SqlGrammarLevel_ANSI92_ENTRY_SQL)),
		afsql.SqlInfoSupportsIntegrityEnhancementFacility:   false,
		afsql.SqlInfoOuterJoinsSupportLevel:                 int32(pb.SqlOuterJoinsSupportLevel_SQL_FULL_OUTER_JOINS),
		afsql.SqlInfoSchemaTerm:                             "schema",
		afsql.SqlInfoProcedureTerm:                          "procedure",
		afsql.SqlInfoCatalogTerm:                            "catalog",
		afsql.SqlInfoCatalogAtStart:                         true,
		afsql.SqlInfoSchemasSupportedActions:                int32(0),
		afsql.SqlInfoCatalogsSupportedActions:               int32(0),
		afsql.SqlInfoSupportedPositionedCommands:            int32(0),
		afsql.SqlInfoSelectForUpdateSupported:               false,
		afsql.SqlInfoStoredProceduresSupported:              false,
		afsql.SqlInfoSupportedSubqueries: bits(
			int32(pb.SqlSupportedSubqueries_SQL_SUBQUERIES_IN_COMPARISONS), int32(pb.SqlSupportedSubqueries_SQL_SUBQUERIES_IN_EXISTS),
			int32(pb.SqlSupportedSubqueries_SQL_SUBQUERIES_IN_INS), int32(pb.SqlSupportedSubqueries_SQL_SUBQUERIES_IN_QUANTIFIEDS)),
		afsql.SqlInfoCorrelatedSubqueriesSupported: true,
		afsql.SqlInfoSupportedUnions:               bits(int32(pb.SqlSupportedUnions_SQL_UNION), int32(pb.SqlSupportedUnions_SQL_UNION_ALL)),

		// Limits: 0 is none, or not known.
		afsql.SqlInfoMaxBinaryLiteralLen:     int64(0),
		afsql.SqlInfoMaxCharLiteralLen:       int64(0),
		afsql.SqlInfoMaxColumnNameLen:        int64(0),
		afsql.SqlInfoMaxColumnsInGroupBy:     int64(0),
		afsql.SqlInfoMaxColumnsInIndex:       int64(0),
		afsql.SqlInfoMaxColumnsInOrderBy:     int64(0),
		afsql.SqlInfoMaxColumnsInSelect:      int64(0),
		afsql.SqlInfoMaxColumnsInTable:       int64(0),
		afsql.SqlInfoMaxConnections:          int64(0),
		afsql.SqlInfoMaxCursorNameLen:        int64(0),
		afsql.SqlInfoMaxIndexLen:             int64(0),
		afsql.SqlInfoDBSchemaNameLen:         int64(0),
		afsql.SqlInfoMaxProcedureNameLen:     int64(0),
		afsql.SqlInfoMaxCatalogNameLen:       int64(0),
		afsql.SqlInfoMaxRowSize:              int64(0),
		afsql.SqlInfoMaxRowSizeIncludesBlobs: false,
		afsql.SqlInfoMaxStatementLen:         int64(0),
		afsql.SqlInfoMaxStatements:           int64(0),
		afsql.SqlInfoMaxTableNameLen:         int64(0),
		afsql.SqlInfoMaxTablesInSelect:       int64(0),
		afsql.SqlInfoMaxUsernameLen:          int64(0),

		// Transactions: none (read-only).
		afsql.SqlInfoDefaultTransactionIsolation:           int32(pb.SqlTransactionIsolationLevel_SQL_TRANSACTION_NONE),
		afsql.SqlInfoTransactionsSupported:                 false,
		afsql.SqlInfoSupportedTransactionsIsolationlevels:  bits(int32(pb.SqlTransactionIsolationLevel_SQL_TRANSACTION_NONE)),
		afsql.SqlInfoDataDefinitionCausesTransactionCommit: false,
		afsql.SqlInfoDataDefinitionsInTransactionsIgnored:  false,

		// Result sets: forward only, read only.
		afsql.SqlInfoSupportedResultSetTypes:                             bits(int32(pb.SqlSupportedResultSetType_SQL_RESULT_SET_TYPE_FORWARD_ONLY)),
		afsql.SqlInfoSupportedConcurrenciesForResultSetUnspecified:       int32(0),
		afsql.SqlInfoSupportedConcurrenciesForResultSetForwardOnly:       bits(int32(pb.SqlSupportedResultSetConcurrency_SQL_RESULT_SET_CONCURRENCY_READ_ONLY)),
		afsql.SqlInfoSupportedConcurrenciesForResultSetScrollSensitive:   int32(0),
		afsql.SqlInfoSupportedConcurrenciesForResultSetScrollInsensitive: int32(0),
		afsql.SqlInfoBatchUpdatesSupported:                               false,
		afsql.SqlInfoSavePointsSupported:                                 false,
		afsql.SqlInfoNamedParametersSupported:                            false,
		afsql.SqlInfoLocatorsUpdateCopy:                                  false,
		afsql.SqlInfoStoredFunctionsUsingCallSyntaxSupported:             false,
	}
}

func registerSQLInfo(b *afsql.BaseServer, version string) error {
	for id, v := range sqlInfo(version) {
		if err := b.RegisterSqlInfo(id, v); err != nil {
			return err
		}
	}
	return nil
}

// xdbcType is a row of GetXdbcTypeInfo: one SQL type the engine answers
// (DuckDB's names), in the ODBC SQLGetTypeInfo form.
type xdbcType struct {
	name           string
	dataType       int32 // XdbcDataType
	columnSize     int32 // 0: null (not applicable)
	prefix, suffix string
	createParams   []string
	caseSensitive  bool
	searchable     int32 // 3: searchable with LIKE and comparisons; 2: comparisons only
	unsigned       bool
	numeric        bool // unsigned_attribute and num_prec_radix apply
	radix          int32
	sqlDataType    int32 // dataType, or XDBC_DATETIME for dates and times
	subcode        int32 // the datetime subcode; 0: null
	minScale       int32
	maxScale       int32
}

// xdbcTypes are sorted by data type, as SQLGetTypeInfo answers them.
var xdbcTypes = func() []xdbcType {
	const (
		searchable = int32(pb.Searchable_SEARCHABLE_FULL)
		basic      = int32(pb.Searchable_SEARCHABLE_BASIC)
		datetime   = int32(pb.XdbcDataType_XDBC_DATETIME)
	)
	num := func(name string, dt, size, radix int32) xdbcType {
		return xdbcType{name: name, dataType: dt, columnSize: size, searchable: basic, numeric: true, radix: radix, sqlDataType: dt}
	}
	dt := func(name string, dataType pb.XdbcDataType, sub pb.XdbcDatetimeSubcode, size int32, prefix string) xdbcType {
		return xdbcType{name: name, dataType: int32(dataType), columnSize: size,
			prefix: prefix + " '", suffix: "'", searchable: basic, sqlDataType: datetime, subcode: int32(sub)}
	}
	dec := num("DECIMAL", int32(pb.XdbcDataType_XDBC_DECIMAL), 38, 10)
	dec.createParams, dec.maxScale = []string{"precision", "scale"}, 38
	return []xdbcType{
		{name: "BOOLEAN", dataType: int32(pb.XdbcDataType_XDBC_BIT), columnSize: 1, searchable: basic, sqlDataType: int32(pb.XdbcDataType_XDBC_BIT)},
		num("TINYINT", int32(pb.XdbcDataType_XDBC_TINYINT), 3, 10),
		num("BIGINT", int32(pb.XdbcDataType_XDBC_BIGINT), 19, 10),
		{name: "BLOB", dataType: int32(pb.XdbcDataType_XDBC_VARBINARY), prefix: `'`, suffix: `'::BLOB`, searchable: basic, sqlDataType: int32(pb.XdbcDataType_XDBC_VARBINARY)},
		dec,
		num("INTEGER", int32(pb.XdbcDataType_XDBC_INTEGER), 10, 10),
		num("SMALLINT", int32(pb.XdbcDataType_XDBC_SMALLINT), 5, 10),
		num("FLOAT", int32(pb.XdbcDataType_XDBC_REAL), 24, 2),
		num("DOUBLE", int32(pb.XdbcDataType_XDBC_DOUBLE), 53, 2),
		{name: "VARCHAR", dataType: int32(pb.XdbcDataType_XDBC_VARCHAR), prefix: `'`, suffix: `'`, caseSensitive: true, searchable: searchable, sqlDataType: int32(pb.XdbcDataType_XDBC_VARCHAR)},
		dt("DATE", pb.XdbcDataType_XDBC_DATE, pb.XdbcDatetimeSubcode_XDBC_SUBCODE_DATE, 10, "DATE"),
		dt("TIME", pb.XdbcDataType_XDBC_TIME, pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIME, 15, "TIME"),
		dt("TIMESTAMP", pb.XdbcDataType_XDBC_TIMESTAMP, pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIMESTAMP, 26, "TIMESTAMP"),
		// The same data type as TIMESTAMP: its subcode tells the instant.
		dt("TIMESTAMP WITH TIME ZONE", pb.XdbcDataType_XDBC_TIMESTAMP, pb.XdbcDatetimeSubcode_XDBC_SUBCODE_TIMESTAMP_WITH_TIMEZONE, 32, "TIMESTAMPTZ"),
	}
}()

func (h *handler) GetFlightInfoXdbcTypeInfo(_ context.Context, _ afsql.GetXdbcTypeInfo, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return flightInfo(desc, desc.GetCmd(), schema_ref.XdbcTypeInfo), nil
}

// DoGetXdbcTypeInfo answers every type, or those of the data type asked.
func (h *handler) DoGetXdbcTypeInfo(_ context.Context, cmd afsql.GetXdbcTypeInfo) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(alloc, schema_ref.XdbcTypeInfo)
	defer b.Release()
	str := func(i int, v string) {
		if v == "" {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.StringBuilder).Append(v)
		}
	}
	i32 := func(i int, v int32, null bool) {
		if null {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.Int32Builder).Append(v)
		}
	}
	for _, t := range xdbcTypes {
		if want := cmd.GetDataType(); want != nil && *want != t.dataType {
			continue
		}
		str(0, t.name)
		i32(1, t.dataType, false)
		i32(2, t.columnSize, t.columnSize == 0)
		str(3, t.prefix)
		str(4, t.suffix)
		params := b.Field(5).(*array.ListBuilder)
		params.Append(true)
		for _, p := range t.createParams {
			params.ValueBuilder().(*array.StringBuilder).Append(p)
		}
		i32(6, int32(pb.Nullable_NULLABILITY_NULLABLE), false)
		b.Field(7).(*array.BooleanBuilder).Append(t.caseSensitive)
		i32(8, t.searchable, false)
		if t.numeric {
			b.Field(9).(*array.BooleanBuilder).Append(t.unsigned)
		} else {
			b.Field(9).AppendNull()
		}
		b.Field(10).(*array.BooleanBuilder).Append(false) // fixed_prec_scale
		b.Field(11).(*array.BooleanBuilder).Append(false) // auto_increment
		str(12, t.name)
		i32(13, t.minScale, t.createParams == nil)
		i32(14, t.maxScale, t.createParams == nil)
		i32(15, t.sqlDataType, false)
		i32(16, t.subcode, t.subcode == 0)
		i32(17, t.radix, !t.numeric)
		b.Field(18).AppendNull() // interval_precision
	}
	return one(b)
}
