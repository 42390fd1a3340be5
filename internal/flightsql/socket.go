package flightsql

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// unixSocket is a unix socket the server created, and removes on
// Shutdown.
type unixSocket struct {
	net.Listener
	path string
	ino  os.FileInfo // the socket as created, to remove only ours
	once sync.Once
}

// cutUnix is the path of a unix:/path address.
func cutUnix(addr string) (string, bool) {
	p, ok := strings.CutPrefix(addr, "unix:")
	return strings.TrimPrefix(p, "//"), ok
}

// listenUnix creates a unix socket at path with mode 0600. It is made
// under a random name beside path, given its mode, then renamed into
// place, so that nobody can connect in the moment a socket created with
// the umask's mode would be open to them. An existing socket at path is
// replaced when nothing answers on it (a process that died left it), and
// refused otherwise.
func listenUnix(path string) (*unixSocket, error) {
	if path == "" {
		return nil, errors.New("empty socket path")
	}
	if err := clearStale(path); err != nil {
		return nil, err
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(suffix[:]))
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	// The socket file is removed by remove, under its final name.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	fail := func(err error) (*unixSocket, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return &unixSocket{Listener: ln, path: path, ino: st}, nil
}

// clearStale removes a socket at path that nothing answers on.
func clearStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use by another process", path)
	}
	return os.Remove(path)
}

// remove closes the listener and removes the socket file, if it is still
// the one this server created (another process may have replaced it
// since).
func (u *unixSocket) remove() {
	u.once.Do(func() {
		u.Close()
		if st, err := os.Lstat(u.path); err == nil && os.SameFile(st, u.ino) {
			os.Remove(u.path)
		}
	})
}
