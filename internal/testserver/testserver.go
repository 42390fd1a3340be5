// Package testserver holds what the tests that start a real database
// server (PostgreSQL for the Iceberg catalog, MariaDB as a CDC source)
// share: a free port, running as the server's own user when the tests run
// as root, waiting until the server answers.
package testserver

import (
	"context"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// FreePort is a loopback TCP port free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RunAs returns the credentials of the system user name (created by the
// server's Debian package) when the test runs as root, nil otherwise:
// PostgreSQL and MariaDB refuse to run as root. That user gets dir, and
// the temporary directories on the way to it are opened for it to reach.
func RunAs(t testing.TB, name, dir string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("running as root and there is no %s user: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// AwaitReady pings until the server answers, for up to a minute; it fails
// the test at once if the server exits (exited receives its Wait error;
// nil for a server not watched), with the server's log (logs() may return
// "").
func AwaitReady(t testing.TB, what string, ping func(context.Context) error, exited <-chan error, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case werr := <-exited:
			t.Fatalf("%s exited: %v\n%s", what, werr, logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 60s: %v\n%s", what, err, logs())
		}
		time.Sleep(50 * time.Millisecond) // polling the server's readiness, not synchronising test steps
	}
}
