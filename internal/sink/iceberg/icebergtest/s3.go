package icebergtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/testserver"
)

// S3 is a running S3 server: versitygw with its posix backend on a
// temporary directory, listening on loopback.
type S3 struct {
	Endpoint, AccessKey, SecretKey, Region string
	Root                                   string // the posix backend's directory: one subdirectory per bucket
}

// StartS3 starts versitygw (found as $TRACELAKE_VERSITYGW or versitygw on
// the PATH; .ci/run installs it) with the bucket, and stops it when the
// test ends.
func StartS3(t testing.TB, bucket string) S3 {
	t.Helper()
	bin := os.Getenv("TRACELAKE_VERSITYGW")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("versitygw"); err != nil {
			t.Fatal("versitygw is not installed: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0 (.ci/run does), " +
				"then put it on the PATH or in TRACELAKE_VERSITYGW")
		}
	}
	s := S3{AccessKey: "tracelake", SecretKey: "tracelake-secret", Region: "us-east-1", Root: t.TempDir()}
	// A bucket of the posix backend is a top-level directory.
	if err := os.Mkdir(filepath.Join(s.Root, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	port := testserver.FreePort(t)
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	// The posix backend keeps objects' metadata in extended attributes,
	// the ETags of a multipart upload's parts included: with --nometa, the
	// completion of an upload of more than one part (a file past the AWS
	// SDK's 8 MiB part) answers InvalidPart (versity/versitygw#1774).
	cmd := exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region,
		"--port", fmt.Sprintf("127.0.0.1:%d", port), "posix", s.Root)
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen within 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the server's readiness
	}
}
