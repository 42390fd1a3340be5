// Package mariadbtest starts a real MariaDB server (Debian's mariadb-server
// package, which .ci/run installs) for the tests that reconcile a CDC model
// with its source database.
package mariadbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
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
	var cred *syscall.Credential
	userFlag := []string{}
	if os.Geteuid() == 0 {
		my, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("running as root and there is no mysql user: %v", err)
		}
		uid, _ := strconv.Atoi(my.Uid)
		gid, _ := strconv.Atoi(my.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
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
	s := &Server{Port: freePort(t), Socket: filepath.Join(dir, "sock")}
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
	db := s.Root(t, "")
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return s
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("mariadbd exited: %v\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("MariaDB did not answer within 60s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's readiness, not synchronising test steps
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
