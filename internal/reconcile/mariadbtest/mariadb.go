// Package mariadbtest starts a real MariaDB server (Debian's mariadb-server
// package, which .ci/run installs) for the tests that reconcile a CDC model
// with its source database.
package mariadbtest

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tracelake/tracelake/internal/testserver"
)

// Server is a running MariaDB.
type Server struct {
	// Port is its loopback TCP port; Socket its unix socket.
	Port   int
	Socket string
}

// Root opens a connection pool as root over the unix socket (root may only
// log in locally), on database db ("" for none). The pool is closed when
// the test ends.
func (s *Server) Root(t testing.TB, db string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "unix", s.Socket, db
	cfg.ParseTime, cfg.Loc = true, time.UTC
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pool := sql.OpenDB(conn)
	t.Cleanup(func() { pool.Close() })
	return pool
}

// Start initialises a data directory in a temporary directory, starts
// mariadbd on it (a free loopback port and a unix socket, no binary log,
// small buffers, utf8mb4 by default), waits until it answers and returns it; it is stopped
// when the test ends. Without mariadbd the test is skipped, or fails when
// CI is set (.ci/run installs it). mariadbd refuses to run as root, so as
// root it runs as the mysql user the package created (as the process's
// credentials, so signals reach the server itself).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("mariadbd")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/mariadbd") // not on a normal user's PATH
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("MariaDB is not installed: CI installs Debian's mariadb-server package (.ci/run)")
		}
		t.Skip("MariaDB is not installed (apt-get install mariadb-server): the reconcile against a source database is not checked")
	}
	// Not t.TempDir(): a unix socket path must stay under ~100 bytes, and
	// test names make those long.
	dir, err := os.MkdirTemp("", "mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	cred := testserver.RunAs(t, "mysql", dir)
	var userFlag []string
	if cred != nil {
		userFlag = []string{"--user=mysql"}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	install := command("mariadb-install-db", append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, userFlag...)...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	s := &Server{Port: testserver.FreePort(t), Socket: filepath.Join(dir, "sock")}
	srv := command(bin, append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + s.Socket,
		"--port=" + strconv.Itoa(s.Port), "--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "pid"),
		"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0",
		"--skip-name-resolve", "--character-set-server=utf8mb4", "--log-error=" + filepath.Join(dir, "error.log")}, userFlag...)...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM) // clean shutdown
		<-exited
	})
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(b)
	}
	testserver.AwaitReady(t, "MariaDB", s.Root(t, "").PingContext, exited, logs)
	return s
}

// Exec runs statements on db, failing the test on the first error.
func Exec(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// DSN is a mysql:// URL for user (with password) on the server's TCP port.
func (s *Server) DSN(user, password, db string) string {
	return fmt.Sprintf("mysql://%s:%s@127.0.0.1:%d/%s", user, password, s.Port, db)
}
