package flightsql

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	adbcfs "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-adbc/go/adbc/sqldriver"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The database/sql adapter of ADBC, as the commands read a running
// process: a DSN of key=value pairs separated by ';'.
func init() {
	sql.Register("flightsql-test", sqldriver.Driver{Driver: adbcfs.NewDriver(memory.DefaultAllocator)})
}

func sqlDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("flightsql-test", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// scanSpans reads rows of (name, n).
func scanSpans(t *testing.T, rows *sql.Rows) []string {
	t.Helper()
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// Through database/sql: a query, and a prepared statement with a
// parameter. (The adapter binds parameters only to prepared statements:
// db.Query with arguments fails in the client, so commands prepare.)
func TestDatabaseSQL(t *testing.T) {
	r, s, _ := setup(t)
	db := sqlDB(t, "uri=grpc+tcp://"+s.Addr+";"+
		adbcfs.OptionRPCCallHeaderPrefix+"x-scope-orgid=a;"+
		adbcfs.OptionAuthorizationHeader+"=Bearer tok-a")
	ctx := context.Background()

	rows, err := db.QueryContext(ctx, allSpans)
	if err != nil {
		t.Fatal(err)
	}
	if got := scanSpans(t, rows); len(got) != spanRows || got[0] != "a-0" {
		t.Errorf("query: %v", got)
	}

	st, err := db.PrepareContext(ctx, spansFrom)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err = st.QueryContext(ctx, int64(8))
	if err != nil {
		t.Fatal(err)
	}
	if got := scanSpans(t, rows); !slices.Equal(got, []string{"a-8", "a-9"}) {
		t.Errorf("prepared with n >= 8: %v", got)
	}

	if _, err := db.QueryContext(ctx, spansFrom, int64(8)); err == nil {
		t.Log("db.Query binds parameters now: the commands need not prepare")
	} else {
		t.Logf("db.Query with arguments: %v", err)
	}
	r.released(t)
}
