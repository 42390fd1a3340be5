package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// demo --serve was read only by the OTLP demo and only after it ran: with
// no --otlp it was ignored (the Kafka demo ran and exited, serving
// nothing), and an address without a port failed after the whole demo,
// naming query.http, a key the user never wrote. Both are bad usage,
// refused before the demo starts.
func TestDemoServeFlagCheckedFirst(t *testing.T) {
	for _, args := range [][]string{
		{"--serve", "127.0.0.1:0"},
		{"--otlp", "--serve", "127.0.0.1"},
	} {
		path := filepath.Join(t.TempDir(), "demo.duckdb")
		err := cmdDemo(context.Background(), context.Background(), append(args, "--messages", "10", "--duckdb", path))
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("demo %v: %v, want a usage error", args, err)
		}
		if _, statErr := os.Stat(path); !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("demo %v: the demo ran (%s exists)", args, path)
		}
	}
}
