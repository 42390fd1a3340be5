package main

import (
	"os"
	"strings"
	"testing"
)

// --config given empty (--config "$CFG" with CFG unset) is refused before
// anything is opened, as an empty --tenant is: it was read as no file,
// and `tracelake sql` ran on the defaults, creating ./tracelake.duckdb and
// its stage directory and answering from that empty database.
func TestEmptyConfigFlagIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{{"sql", "--config=", "SELECT 1"}, {"config", "--config", ""}, {"verify", "--config="}} {
		var code int
		_, stderr := captureOutput(t, func() { code = run(args) })
		if code != exitUsage || !strings.Contains(stderr, "--config is empty") {
			t.Errorf("tracelake %q: exit %d, stderr %q; want %d and --config named", args, code, stderr, exitUsage)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("created %s", e.Name())
	}
}
