package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command that only reads the DuckDB file, given a path where no file
// is (a mistyped sink.duckdb.path or --duckdb), created an empty database
// there, and its .stage directory beside it, and answered from it: no
// rows, no problem, nothing dead-lettered, and litter where the user
// mistyped. It now refuses, naming the setting and the path, and leaves
// nothing there.
func TestReadCommandsRefuseAMissingDatabase(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(env *cmdEnv, path string) error
	}{
		{"verify", func(env *cmdEnv, path string) error {
			return cmdVerify(t.Context(), env, []string{"--duckdb", path, "--topics", "t", "--brokers", "127.0.0.1:1"})
		}},
		{"sql", func(env *cmdEnv, path string) error {
			return cmdSQL(t.Context(), env, []string{"--duckdb", path, "SELECT 1"})
		}},
		{"dlq list", func(env *cmdEnv, path string) error {
			return cmdDLQ(t.Context(), env, []string{"list", "--duckdb", path})
		}},
		{"reconcile", func(env *cmdEnv, path string) error {
			return cmdReconcile(t.Context(), env, []string{"--duckdb", path, "--left", "a", "--right", "b", "--key", "id"})
		}},
		{"report", func(env *cmdEnv, path string) error {
			// report reads the spans' operations: a config that loads them.
			cfgPath := filepath.Join(t.TempDir(), "otlp.yaml")
			if err := os.WriteFile(cfgPath, []byte("kafka: {format: otlp_json, signal: traces}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return cmdReport(t.Context(), env, []string{"--config", cfgPath, "--duckdb", path, "-o", "-"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tracelak.duckdb") // mistyped
			var out strings.Builder
			err := tc.run(&cmdEnv{stdout: &out, stderr: &out}, path)
			code, msg := exitStatus(err)
			if code == exitOK || !strings.Contains(msg, "sink.duckdb.path") || !strings.Contains(msg, "no database at "+path) {
				t.Errorf("exit %d: %q\n%s\nwant a failure naming sink.duckdb.path and %s", code, msg, out.String(), path)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("left %s in %s, want nothing created", e.Name(), dir)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("stat %s: %v, want no file", path, err)
			}
		})
	}
}
