package main

import (
	"strings"
	"testing"
)

// `tracelake prices list --config "$CFG"` with CFG unset is refused as the
// other commands refuse an empty --config: it listed the table built in,
// not the config's genai.prices_file, without a word.
func TestPricesEmptyConfigFlagIsRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"prices", "list", "--config="}, {"prices", "match", "gpt-4o", "--config", ""}} {
		var code int
		_, stderr := captureOutput(t, func() { code = run(args) })
		if code != exitUsage || !strings.Contains(stderr, "--config is empty") {
			t.Errorf("tracelake %q: exit %d, stderr %q; want %d and --config named", args, code, stderr, exitUsage)
		}
	}
}
