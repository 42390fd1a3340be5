package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// captureOutput runs f with os.Stdout and os.Stderr going to pipes and
// returns what each received.
func captureOutput(t *testing.T, f func()) (stdout, stderr string) {
	t.Helper()
	read := func(target **os.File) (restore func() string) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		old := *target
		*target = w
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- string(b)
		}()
		return func() string {
			*target = old
			w.Close()
			return <-got
		}
	}
	restoreOut := read(&os.Stdout)
	restoreErr := read(&os.Stderr)
	f()
	return restoreOut(), restoreErr()
}

// A misspelt command names the command it is a letter or two from: a new
// user's `tracelake verfy` got the whole usage and had to find the typo.
func TestUnknownCommandSuggestsTheNearest(t *testing.T) {
	for typo, want := range map[string]string{"verfy": "verify", "confg": "config", "mege": "merge", "sqll": "sql"} {
		var code int
		_, stderr := captureOutput(t, func() { code = run([]string{typo}) })
		if code != exitUsage {
			t.Errorf("tracelake %s: exit %d, want %d", typo, code, exitUsage)
		}
		if hint := `did you mean "` + want + `"?`; !strings.Contains(stderr, hint) {
			t.Errorf("tracelake %s: stderr does not say %s:\n%s", typo, hint, stderr)
		}
	}
	_, stderr := captureOutput(t, func() { run([]string{"frobnicate"}) })
	if strings.Contains(stderr, "did you mean") {
		t.Errorf("a word near no command got a suggestion:\n%s", stderr)
	}
}
