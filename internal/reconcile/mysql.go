package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// SourceError is a source or table argument that cannot be used as given:
// a malformed URL, a table that does not exist or has no primary key.
type SourceError struct{ Err error }

func (e SourceError) Error() string { return e.Err.Error() }
func (e SourceError) Unwrap() error { return e.Err }

func sourceErrorf(format string, args ...any) error {
	return SourceError{fmt.Errorf(format, args...)}
}

// MySQLConfig turns a source URL into the driver's config:
//
//	mysql://user:password@host[:3306]/[database][?driver parameters]
//	mysql://user:password@/database?socket=/run/mysqld/mysqld.sock
//
// The parameters are go-sql-driver/mysql's (tls=true, timeout=5s, …).
// Values come back as Go types (parseTime) and in UTC: the session's time
// zone is UTC, so TIMESTAMP columns read as the instants they hold and
// DATETIME columns as the wall-clock time they hold, taken as UTC.
func MySQLConfig(source string) (*mysql.Config, error) {
	u, err := url.Parse(source)
	if err == nil && u.Port() != "" {
		_, err = strconv.ParseUint(u.Port(), 10, 16)
	}
	if err != nil || u.Scheme != "mysql" {
		// url.Parse's error repeats the URL, password included.
		return nil, sourceErrorf("--source: want mysql://user:password@host:port/database, got %q", redact(source))
	}
	q := u.Query()
	addr := "tcp(" + hostPort(u) + ")"
	if sock := q.Get("socket"); sock != "" {
		addr = "unix(" + sock + ")"
		q.Del("socket")
	}
	dsn := addr + "/" + strings.TrimPrefix(u.Path, "/")
	if len(q) > 0 {
		dsn += "?" + q.Encode()
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, sourceErrorf("--source %s: %w", u.Redacted(), err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.ParseTime, cfg.Loc = true, time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

func hostPort(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3306"
	}
	return net.JoinHostPort(host, port)
}

// redact hides the password of a URL, also of one that does not parse.
func redact(source string) string {
	at := strings.LastIndex(source, "@")
	if at < 0 {
		return source
	}
	start := 0
	if i := strings.Index(source[:at], "://"); i >= 0 {
		start = i + len("://")
	}
	user, _, _ := strings.Cut(source[start:at], ":")
	return source[:start] + user + ":xxxxx" + source[at:]
}

// MySQLTable is a table of a MySQL or MariaDB server, its primary key and
// columns as the server describes them.
type MySQLTable struct {
	DB              *sql.DB
	Database, Table string
	Key, Columns    []string
	// Types are declared types the driver does not tell: MariaDB's JSON
	// is LONGTEXT with a json_valid check, sent as text.
	Types  map[string]string
	source string // the URL, password hidden
}

// OpenMySQL connects to the server of source and describes table
// ("database.table", or "table" in the URL's database). The caller closes
// t.DB.
func OpenMySQL(ctx context.Context, source, table string) (*MySQLTable, error) {
	cfg, err := MySQLConfig(source)
	if err != nil {
		return nil, err
	}
	t := &MySQLTable{Database: cfg.DBName, Table: table, source: redact(source)}
	if d, name, ok := strings.Cut(table, "."); ok {
		t.Database, t.Table = d, name
	}
	if t.Database == "" || t.Table == "" || strings.Contains(t.Table, ".") {
		return nil, sourceErrorf("--table: want database.table (or table with a database in --source), got %q", table)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, sourceErrorf("--source %s: %w", t.source, err)
	}
	t.DB = sql.OpenDB(conn)
	// One connection: the scan reads batch after batch, never in parallel.
	t.DB.SetMaxOpenConns(1)
	if err := t.describe(ctx); err != nil {
		t.DB.Close()
		return nil, err
	}
	return t, nil
}

func (t *MySQLTable) describe(ctx context.Context) error {
	var kind string
	err := t.DB.QueryRowContext(ctx, `SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		t.Database, t.Table).Scan(&kind)
	if errors.Is(err, sql.ErrNoRows) {
		return sourceErrorf("source table %s.%s does not exist (or the user %s may not see it)", t.Database, t.Table, t.source)
	}
	if err != nil {
		return fmt.Errorf("look up source table %s.%s on %s: %w", t.Database, t.Table, t.source, err)
	}
	list := func(what, q string) ([]string, error) {
		rows, err := t.DB.QueryContext(ctx, q, t.Database, t.Table)
		if err != nil {
			return nil, fmt.Errorf("read the %s of %s.%s: %w", what, t.Database, t.Table, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				return nil, fmt.Errorf("read the %s of %s.%s: %w", what, t.Database, t.Table, err)
			}
			out = append(out, c)
		}
		return out, rows.Err()
	}
	if t.Columns, err = list("columns", `SELECT COLUMN_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`); err != nil {
		return err
	}
	if t.Key, err = list("primary key", `SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION`); err != nil {
		return err
	}
	if t.Types, err = t.jsonColumns(ctx); err != nil {
		return err
	}
	if len(t.Key) == 0 {
		// Without a key the table can be neither read in key ranges nor
		// joined to the model by key.
		return sourceErrorf("source table %s.%s has no primary key: it cannot be reconciled by key", t.Database, t.Table)
	}
	return nil
}

// jsonColumns finds MariaDB's JSON columns: JSON is an alias there of
// LONGTEXT CHECK (json_valid(col)), which the driver reports as text, so
// they would be hashed as the text they were written as, spacing and key
// order included. MySQL's JSON is a type of its own that the driver names.
func (t *MySQLTable) jsonColumns(ctx context.Context) (map[string]string, error) {
	var version string
	if err := t.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("read the server version of %s: %w", t.source, err)
	}
	if !strings.Contains(version, "MariaDB") {
		return nil, nil
	}
	rows, err := t.DB.QueryContext(ctx, `SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?`, t.Database, t.Table)
	if err != nil {
		return nil, fmt.Errorf("read the check constraints of %s.%s: %w", t.Database, t.Table, err)
	}
	defer rows.Close()
	types := map[string]string{}
	for rows.Next() {
		var clause string
		if err := rows.Scan(&clause); err != nil {
			return nil, fmt.Errorf("read the check constraints of %s.%s: %w", t.Database, t.Table, err)
		}
		for _, c := range t.Columns {
			if clause == "json_valid("+mysqlIdent(c)+")" {
				types[c] = "JSON"
			}
		}
	}
	return types, rows.Err()
}

// Side is the table as one side of CompareStreams, read batch rows at a
// time, at most rate rows a second (0: no cap).
func (t *MySQLTable) Side(batch int, rate float64) Table {
	return Table{Name: t.Database + "." + t.Table, DB: t.DB, From: mysqlIdent(t.Database) + "." + mysqlIdent(t.Table),
		Quote: mysqlIdent, Types: t.Types, Batch: batch, Rate: rate}
}

func mysqlIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
