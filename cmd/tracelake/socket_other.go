//go:build !unix

package main

import (
	"errors"
	"net"
	"os"
)

// maxSocketPath: no local socket on this system.
var maxSocketPath = 0

func listenPrivate(string) (net.Listener, error) {
	return nil, errors.New("no private unix sockets on this system")
}

func ownedByMe(os.FileInfo) bool { return false }
