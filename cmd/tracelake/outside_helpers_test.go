package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// helperEnv makes this test binary, re-executed by BenchmarkOutside, play
// one of the processes around `tracelake run` instead of running tests
// (the pattern of os/exec's own tests: no second main to build and keep).
// A helper prints one line (its address, or what it measured) and, if it
// serves, serves until its stdin closes.
const helperEnv = "TRACELAKE_BENCH_HELPER"

func init() {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelper(role, os.Args[1:]))
	}
}

func runHelper(role string, args []string) int {
	var err error
	switch role {
	case "kafka":
		err = serveKafka()
	case "databend":
		err = serveDatabend()
	case "consume":
		err = bareConsume(args)
	default:
		err = fmt.Errorf("unknown helper %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

// serveKafka runs a kfake broker with testTopic in 4 partitions.
func serveKafka() error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, testTopic))
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer cluster.Close()
	fmt.Println(cluster.ListenAddrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// serveDatabend runs the Databend test server.
func serveDatabend() error {
	srv := databendtest.New("cloudapp", "s3cret")
	defer srv.Close()
	fmt.Println(srv.DSN(""))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// bareConsume reads n records of testTopic from broker args[0] in group
// args[1] with a franz-go group consumer doing nothing else, and prints the
// CPU (user and system, ns) and wall time it took, from the client's
// creation to the last record: the yardstick a run's CPU is measured
// against. This binary's start is left out (it is not franz-go's).
func bareConsume(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want broker, group and records, got %q", args)
	}
	n, err := strconv.Atoi(args[2])
	if err != nil {
		return fmt.Errorf("records: %w", err)
	}
	before, start := selfUsage(), time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(args[0]), kgo.ConsumeTopics(testTopic), kgo.ConsumerGroup(args[1]),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	for got := 0; got < n; {
		fs := cl.PollRecords(context.Background(), 10000)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		got += fs.NumRecords()
	}
	cl.Close()
	wall, after := time.Since(start), selfUsage()
	fmt.Println(after.user-before.user, after.sys-before.sys, wall.Nanoseconds())
	return nil
}

// cpuUsage is CPU time in ns.
type cpuUsage struct{ user, sys int64 }

func selfUsage() cpuUsage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuUsage{ru.Utime.Nano(), ru.Stime.Nano()}
}

// childUsage is the CPU of an exited child.
func childUsage(cmd *exec.Cmd) cpuUsage {
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return cpuUsage{ru.Utime.Nano(), ru.Stime.Nano()}
}

// helper is a helper process and the line it printed.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  string
}

// startHelper starts this test binary as helper role and reads its line;
// a serving helper is stopped at the benchmark's cleanup.
func startHelper(b *testing.B, role string, args ...string) *helper {
	b.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start helper %s: %v", role, err)
	}
	h := &helper{cmd: cmd, stdin: stdin}
	b.Cleanup(func() { h.stop(b) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("helper %s: %v", role, err)
	}
	h.line = line[:len(line)-1]
	return h
}

// stop closes the helper's stdin and waits for it to exit.
func (h *helper) stop(b *testing.B) {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	if err := h.cmd.Wait(); err != nil {
		b.Errorf("helper: %v", err)
	}
}
