//go:build unix

package main

import (
	"net"
	"os"
	"syscall"
)

// maxSocketPath is the longest path a unix socket takes (107 bytes on
// Linux, 103 on macOS: sun_path less its terminating NUL).
var maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// listenPrivate listens on a unix socket at path that only this user can
// connect to: the socket file is created with mode 0600. The umask is set
// around the bind rather than chmod after it, so there is no moment when
// others could connect; it is the process's, so a file another goroutine
// creates meanwhile is at most more private than asked.
func listenPrivate(path string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	lis, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	return lis, nil
}

// ownedByMe says whether the file fi belongs to the user running this
// process.
func ownedByMe(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
