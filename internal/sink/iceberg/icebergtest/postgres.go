// Package icebergtest starts what the Iceberg sink's tests need that is
// not in-process: a real PostgreSQL server (Debian's postgresql-15
// package, which .ci/run installs) for the catalog of many instances.
package icebergtest

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/tracelake/tracelake/internal/testserver"
)

// StartPostgres initialises a cluster in a temporary directory, starts a
// server on a free loopback port, waits until it answers and returns its
// URL. The server is stopped when the test ends. PostgreSQL refuses to run
// as root, so as root it runs as the postgres user the package created
// (set as the process's credentials, so signals reach the server itself).
func StartPostgres(t testing.TB) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("PostgreSQL is not installed: apt-get install postgresql-15 (.ci/run does)")
	}
	binDir := filepath.Dir(bins[len(bins)-1])
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cred := testserver.RunAs(t, "postgres", dir)
	if cred != nil {
		// The cluster's directory must be the postgres user's, and private.
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(binDir, name), args...)
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	if out, err := command("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := testserver.FreePort(t)
	srv := command("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "max_connections=200")
	if testing.Verbose() {
		srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Signal(os.Interrupt) // fast shutdown
		_ = srv.Wait()
	})
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testserver.AwaitReady(t, "PostgreSQL", db.PingContext, nil, func() string { return "" })
	return url
}
