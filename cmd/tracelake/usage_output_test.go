package main

import (
	"context"
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

// A command's usage asked for with -h is its answer, on stdout as
// `tracelake --help` prints the top-level usage (so `tracelake run -h |
// less` pages it); after a flag it does not know the usage explains an
// error, on stderr, with nothing on stdout. The commands that also run
// inside `tracelake run` print to their environment's streams.
func TestCommandHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"config", "--help"}, {"merge", "-h"}, {"prices", "update", "-h"}, {"prices", "match", "-h"}} {
		stdout, stderr := captureOutput(t, func() { run(args) })
		if !strings.Contains(stdout, "Usage of") {
			t.Errorf("tracelake %s: the usage is not on stdout:\nstdout %q\nstderr %q", strings.Join(args, " "), stdout, stderr)
		}
		if stderr != "" {
			t.Errorf("tracelake %s: stderr %q, want nothing", strings.Join(args, " "), stderr)
		}
	}
	stdout, stderr := captureOutput(t, func() { run([]string{"merge", "--no-such-flag"}) })
	if stdout != "" || !strings.Contains(stderr, "no-such-flag") || !strings.Contains(stderr, "Usage of merge") {
		t.Errorf("an unknown flag: stdout %q, stderr %q; want the error and the usage on stderr alone", stdout, stderr)
	}
	for _, args := range [][]string{{"-h"}, {"--no-such-flag"}} {
		var out, errs strings.Builder
		cmdVerify(context.Background(), &cmdEnv{stdout: &out, stderr: &errs}, args)
		usage, other := &out, &errs
		if args[0] != "-h" {
			usage, other = &errs, &out
		}
		if !strings.Contains(usage.String(), "Usage of verify") || other.Len() != 0 {
			t.Errorf("verify %s: stdout %q, stderr %q; want the usage on %s alone", args[0], out.String(), errs.String(),
				map[bool]string{true: "stdout", false: "stderr"}[args[0] == "-h"])
		}
	}
}
