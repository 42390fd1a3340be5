package tenancy

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// writeTokens writes a tokens file in a test's directory.
func writeTokens(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadTokens(t *testing.T, content string) *Tokens {
	t.Helper()
	tk, err := LoadTokens(writeTokens(t, content), discardLog())
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func list(ts ...string) Tenants { return Tenants{List: ts} }

var anyTenant = Tenants{Any: true}

// Each form of line grants what the format says; a token not in the file,
// and "", are not found.
func TestTokensFile(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       map[string]Grant // token → grant; nil Grant: not found
	}{
		{"old form: one tenant, written only", "tok-a team-a\n",
			map[string]Grant{"tok-a": {Write: list("team-a")}}},
		{"old form: several", "tok-ab team-a,team-b\n",
			map[string]Grant{"tok-ab": {Write: list("team-a", "team-b")}}},
		{"old form: any, and no read", "tok-all *\n",
			map[string]Grant{"tok-all": {Write: anyTenant}}},
		{"old form: * among tenants is any", "tok-all team-a,*\n",
			map[string]Grant{"tok-all": {Write: anyTenant}}},
		{"write only", "tok-w write=team-a\n",
			map[string]Grant{"tok-w": {Write: list("team-a")}}},
		{"read only", "tok-r read=team-a,team-b\n",
			map[string]Grant{"tok-r": {Read: list("team-a", "team-b")}}},
		{"both, read first", "tok-wr read=* write=team-a\n",
			map[string]Grant{"tok-wr": {Write: list("team-a"), Read: anyTenant}}},
		{"both, write first", "tok-wr write=team-a read=team-a,team-c\n",
			map[string]Grant{"tok-wr": {Write: list("team-a"), Read: list("team-a", "team-c")}}},
		{"comments, blank lines, spaces and tabs",
			"# tokens\n\n   \n  tok-a \t team-a  \n\t# tok-b team-b\ntok-c\tread=team-c\n",
			map[string]Grant{"tok-a": {Write: list("team-a")}, "tok-b": {}, "tok-c": {Read: list("team-c")}}},
		{"a token holding = (base64 padding)", "dG9rZW4= team-a\n",
			map[string]Grant{"dG9rZW4=": {Write: list("team-a")}}},
		{"unknown and empty tokens", "tok-a team-a\n",
			map[string]Grant{"tok-b": {}, "": {}, "tok-a ": {}}},
	} {
		tk := loadTokens(t, c.file)
		for token, want := range c.want {
			got, ok := tk.Lookup(token)
			found := !reflect.DeepEqual(want, Grant{})
			if ok != found || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: token %q: %+v (found %v), want %+v (found %v)", c.name, token, got, ok, want, found)
			}
		}
	}
}

// A line not of the format fails the whole file, naming the file and the
// line, and never the token.
func TestTokensFileErrors(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
	}{
		{"token alone", "# ok\nsecret-1\n", "line 2: no tenants"},
		{"old form, three fields", "secret-1 team-a team-b\n", `line 1: "team-a" is not a field`},
		{"old form and a field", "secret-1 team-a read=team-b\n", `line 1: "team-a" is not a field`},
		{"unknown field", "secret-1 write=team-a admin=yes\n", `line 1: unknown field "admin=": want write= or read=`},
		{"unknown field alone", "secret-1 tenant=team-a\n", `line 1: unknown field "tenant="`},
		{"field twice", "secret-1 read=team-a read=team-b\n", "line 1: field read= given twice"},
		{"empty field", "secret-1 write=\n", `line 1: write=: tenants "": empty tenant id`},
		{"empty tenant in a list", "secret-1 team-a,,team-b\n", "line 1: tenants \"team-a,,team-b\": empty tenant id"},
		{"trailing comma", "secret-1 read=team-a,\n", "line 1: read=: tenants \"team-a,\": empty tenant id"},
		{"malformed tenant", "secret-1 team/a\n", `line 1: tenants "team/a": tenant id "team/a" has '/'`},
		{"Mimir's several tenants", "secret-1 read=a|b\n", `line 1: read=: tenants "a|b"`},
		{"no token before the fields", "write=team-a read=team-a\n", "line 1: starts with a write= field"},
		{"the same token twice", "secret-1 team-a\nsecret-2 team-b\nsecret-1 team-c\n", "line 3: the same token as line 1"},
	} {
		path := writeTokens(t, c.file)
		_, err := LoadTokens(path, discardLog())
		switch {
		case err == nil:
			t.Errorf("%s: loaded", c.name)
		case !strings.HasPrefix(err.Error(), "tokens file "+path+", ") || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q, want the file and %q", c.name, err, c.want)
		case strings.Contains(err.Error(), "secret-"):
			t.Errorf("%s: %q shows the token", c.name, err)
		}
	}
	if _, err := LoadTokens(filepath.Join(t.TempDir(), "missing"), discardLog()); err == nil {
		t.Error("a missing file loaded")
	}
}

// A changed tokens file takes effect without a restart; one that no longer
// parses leaves the tokens as they were, and neither shows a token in the
// log.
func TestTokensFileReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	can := func(tk *Tokens, token, tenant string) (write, read bool) {
		g, ok := tk.Lookup(token)
		return ok && g.Write.Holds(tenant), ok && g.Read.Holds(tenant)
	}
	var logged bytes.Buffer
	write("old-token team-a\n")
	tk, err := LoadTokens(path, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if w, r := can(tk, "old-token", "team-a"); !w || r {
		t.Fatal("first tokens not in effect (the old form writes and does not read)")
	}
	if w, r := can(tk, "old-token", "team-b"); w || r {
		t.Fatal("first tokens hold another tenant")
	}

	write("new-token-longer write=team-a read=team-a,team-b\n")
	if _, ok := tk.Lookup("new-token-longer"); ok {
		t.Fatal("reloaded within reloadEvery of the last look")
	}
	tk.checked = time.Time{} // as if reloadEvery had passed
	if _, ok := tk.Lookup("old-token"); ok {
		t.Fatal("changed tokens file not reloaded: the old token stays")
	}
	if w, r := can(tk, "new-token-longer", "team-b"); w || !r {
		t.Fatalf("reloaded token: write %v read %v of team-b, want false true", w, r)
	}

	write("new-token-longer write=team-a read=team-a,team-b\nthis line has=a bad field\n")
	tk.checked = time.Time{}
	if w, r := can(tk, "new-token-longer", "team-b"); w || !r {
		t.Fatal("a broken tokens file replaced the tokens")
	}
	if !strings.Contains(logged.String(), "tokens file not reloaded") || !strings.Contains(logged.String(), "line 2") {
		t.Errorf("the broken file is not in the log:\n%s", logged.String())
	}
	for _, token := range []string{"old-token", "new-token-longer", "this"} {
		if strings.Contains(logged.String(), token) {
			t.Errorf("the log shows token %q:\n%s", token, logged.String())
		}
	}
}

// An Authorization value's bearer token, the scheme in any case (RFC
// 9110 11.1); none for another scheme.
func TestBearer(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer s3cr3t": "s3cr3t", "bearer s3cr3t": "s3cr3t", "BEARER  s3cr3t ": "s3cr3t",
		// gRPC metadata keeps the whitespace net/http strips.
		" Bearer s3cr3t": "s3cr3t", "\tBearer s3cr3t": "s3cr3t",
		"Basic dXNlcjpwdw==": "", "Bearer": "", "": "", "Bearers s3cr3t": "",
	} {
		if got := Bearer(in); got != want {
			t.Errorf("Bearer(%q) = %q, want %q", in, got, want)
		}
	}
}

// A tokens file replaced by one of the same size and modification time
// (a token rotated for one of the same length, deployed with cp -p or
// rsync -t, or written twice within one tick of the file system's clock)
// is read again: the revoked token is refused, the new one taken. Found
// by a review.
func TestTokensFileReplacedWithTheSameSizeAndTimeIsReloaded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(path, "leaked-token-aaaa team-a\n")
	tk, err := LoadTokens(path, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.Lookup("leaked-token-aaaa"); !ok {
		t.Fatal("the first token is not in effect")
	}
	// The rotation, deployed atomically (a new file renamed over the old
	// one) with its time preserved: the same size, another token.
	next := filepath.Join(dir, "tokens.new")
	write(next, "fresh-token-bbbbb team-a\n")
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	tk.checked = time.Time{} // as if reloadEvery had passed
	if _, ok := tk.Lookup("leaked-token-aaaa"); ok {
		t.Error("the revoked token still writes team-a: the replaced file (same size and mtime, another inode and content) was not read again")
	}
	if _, ok := tk.Lookup("fresh-token-bbbbb"); !ok {
		t.Error("the new token is refused: the replaced file was not read again")
	}
}
