package flightsql

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// localTenants trusts the socket's callers: the operator when they name
// no tenant.
var localTenants = TenantsFunc(func(sent, _ string) (tenancy.Scope, error) {
	if sent == "" {
		return tenancy.Operator, nil
	}
	return tenancy.One(sent), nil
})

// The local socket: mode 0600, its callers resolved by SocketTenants
// (here the operator, without a token) while the TCP address keeps
// Tenants; removed on Shutdown.
func TestLocalSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tracelake.sock")
	r := &fakeReader{}
	s, err := Start(Options{Listen: "127.0.0.1:0", Socket: path, Reader: r, Tenants: testTenants, SocketTenants: localTenants, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if s.Socket != path {
		t.Errorf("Socket %q, want %q", s.Socket, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket of mode 0600", st.Mode())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(leftovers) != 0 {
		t.Errorf("temporary sockets left: %v", leftovers)
	}

	got := runQuery(t, adbcConn(t, "grpc+unix://"+path, "", "", nil), allSpans)
	if len(got.names) != 2*spanRows {
		t.Errorf("operator on the socket: %d rows, want %d (both tenants)", len(got.names), 2*spanRows)
	}
	_, err = client(t, s.Addr).Execute(context.Background(), allSpans)
	wantCode(t, "no token over TCP", err, codes.Unauthenticated)

	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Shutdown: %v", err)
	}
	r.released(t)
}

// Listen takes a unix:/path too, served like the TCP address (Tenants).
func TestListenOnUnixPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight.sock")
	_, s, _ := setup(t, func(o *Options) { o.Listen = "unix:" + path })
	if s.Addr != "unix:"+path {
		t.Errorf("Addr %q", s.Addr)
	}
	got := runQuery(t, adbcConn(t, "grpc+unix://"+path, "b", "tok-b", nil), allSpans)
	if len(got.names) != spanRows || got.names[0] != "b-0" {
		t.Errorf("tenant b over the unix address: %v", got.names)
	}
}

// A socket left by a process that died is replaced; one another process
// still listens on is not, and is left alone; a file that is not a
// socket is not removed.
func TestSocketInUse(t *testing.T) {
	dir := t.TempDir()
	open := func(path string) error {
		s, err := Start(Options{Socket: path, Reader: &fakeReader{}, Tenants: testTenants, Log: quiet})
		if err == nil {
			s.Shutdown(context.Background())
		}
		return err
	}

	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if err := open(stale); err != nil {
		t.Errorf("stale socket: %v", err)
	}

	live := filepath.Join(dir, "live.sock")
	ln, err = net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := open(live); err == nil {
		t.Error("took over a socket another process listens on")
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("the live socket was removed: %v", err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(file); err == nil {
		t.Error("listened in place of a regular file")
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the file was removed: %v", err)
	}
}
