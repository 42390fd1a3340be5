package tenancy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tokens are the bearer tokens clients may show, each with the tenants it
// may write and read, read from a file and read again when the file
// changes. Each line of the file is a token and what it may do:
//
//	# token       tenants
//	s3cr3t-team-a team-a
//	s3cr3t-ops    team-a,team-b
//	s3cr3t-admin  *
//	s3cr3t-app    write=team-a
//	s3cr3t-grafana read=team-a,team-b
//	s3cr3t-both   write=team-a read=team-a,team-b
//	s3cr3t-ops-rw write=* read=*
//
// A bare list of tenants (comma-separated, or * for any tenant) is what
// the token may write, as before reads had grants of their own: a token
// given to a collector before the query endpoints existed must not read
// every tenant once they are turned on. Otherwise the fields write= and
// read= each give a list, in any order, either left out (the token may
// then not do that at all). Each tenant must be a valid tenant id
// (CheckTenant); a * in a list means any tenant. Blank lines and lines
// starting with # are skipped; any other line that is not of this form,
// an unknown field, a field given twice or a token on two lines makes the
// whole file an error naming the file and line. Tokens are kept as
// SHA-256 hashes and never logged, nor put in an error.
type Tokens struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time // last look at the file
	sum     [32]byte  // SHA-256 of the file as last read
	grants  map[[32]byte]Grant
}

// Grant is what one token may do.
type Grant struct {
	Write, Read Tenants
}

// Tenants are the tenants a token may act for in one way: those listed,
// or any.
type Tenants struct {
	Any  bool     // * : every tenant, those to come too
	List []string // when not Any; nil for none
}

// Holds says whether tenant t is among s.
func (s Tenants) Holds(t string) bool {
	return s.Any || slices.Contains(s.List, t)
}

// reloadEvery bounds how often the file is read again to see whether it
// changed. Its contents decide, not its modification time and size: a
// token rotated for one of the same length, in a file copied with its
// time kept (cp -p, rsync -t) or written twice within one tick of the
// file system's clock, is a change they do not show.
const reloadEvery = time.Second

// LoadTokens reads the tokens file; log is told of each reload (and of a
// file that no longer reads).
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	t := &Tokens{path: path, log: log}
	if _, err := t.read(); err != nil {
		return nil, err
	}
	t.checked = time.Now()
	return t, nil
}

// CheckTokensFile reads and parses the tokens file at path as LoadTokens
// does, keeping nothing: config validation reports a bad file before
// anything starts.
func CheckTokensFile(path string) error {
	_, err := (&Tokens{path: path}).read()
	return err
}

// read reads the file and takes its tokens if it changed since the last
// read; changed says whether it did.
func (t *Tokens) read() (changed bool, err error) {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return false, fmt.Errorf("tokens file: %w", err)
	}
	sum := sha256.Sum256(data)
	if t.grants != nil && sum == t.sum {
		return false, nil
	}
	grants, err := parseTokens(data)
	if err != nil {
		return false, fmt.Errorf("tokens file %s, %w", t.path, err)
	}
	t.grants, t.sum = grants, sum
	return true, nil
}

// parseTokens reads the lines of a tokens file; an error starts with the
// line ("line 3: …").
func parseTokens(data []byte) (map[[32]byte]Grant, error) {
	grants := map[[32]byte]Grant{}
	lineOf := map[[32]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 1
	for ; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		g, err := parseGrant(fields)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		h := sha256.Sum256([]byte(fields[0]))
		if first, ok := lineOf[h]; ok {
			// Which of the two would hold is a guess either way: a line
			// added below to narrow a token would silently not.
			return nil, fmt.Errorf("line %d: the same token as line %d", n, first)
		}
		grants[h], lineOf[h] = g, n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n, err)
	}
	return grants, nil
}

// parseGrant reads the fields of one line: the token, then either one
// list of tenants or write= and read= fields. Errors never quote the
// token.
func parseGrant(fields []string) (Grant, error) {
	const want = "want a token, then its tenants (comma-separated, or *) or write=… and read=… fields"
	if len(fields) < 2 {
		return Grant{}, fmt.Errorf("no tenants: %s", want)
	}
	if k, _, ok := strings.Cut(fields[0], "="); ok && (k == "write" || k == "read") {
		// A token written like a field is a line missing its token.
		return Grant{}, fmt.Errorf("starts with a %s= field: %s", k, want)
	}
	if len(fields) == 2 && !strings.Contains(fields[1], "=") {
		// A tenant id cannot hold =, so this is the bare list.
		s, err := parseTenants(fields[1])
		if err != nil {
			return Grant{}, err
		}
		return Grant{Write: s}, nil
	}
	var g Grant
	var seen [2]bool // write, read
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Grant{}, fmt.Errorf("%q is not a field: %s", f, want)
		}
		var dst *Tenants
		var i int
		switch k {
		case "write":
			dst, i = &g.Write, 0
		case "read":
			dst, i = &g.Read, 1
		default:
			return Grant{}, fmt.Errorf("unknown field %q: want write= or read=", k+"=")
		}
		if seen[i] {
			return Grant{}, fmt.Errorf("field %s= given twice", k)
		}
		seen[i] = true
		s, err := parseTenants(v)
		if err != nil {
			return Grant{}, fmt.Errorf("%s=: %w", k, err)
		}
		*dst = s
	}
	return g, nil
}

// parseTenants reads a comma-separated list of tenants, or *.
func parseTenants(list string) (Tenants, error) {
	var s Tenants
	for _, t := range strings.Split(list, ",") {
		if t == "*" {
			s.Any = true
			continue
		}
		if err := CheckTenant(t); err != nil {
			return Tenants{}, fmt.Errorf("tenants %q: %w", list, err)
		}
		// Once each: a read implies the tenant of a token reading one,
		// which a list naming it twice still is (Resolver.Read).
		if !slices.Contains(s.List, t) {
			s.List = append(s.List, t)
		}
	}
	if s.Any {
		s.List = nil
	}
	return s, nil
}

// reload reads the file again if it changed; a file that no longer reads
// keeps the tokens as they were (and says so in the log).
func (t *Tokens) reload() {
	if time.Since(t.checked) < reloadEvery {
		return
	}
	t.checked = time.Now()
	changed, err := t.read()
	if err != nil {
		t.log.Error("tokens file not reloaded; the previous tokens stay", "err", err)
		return
	}
	if !changed {
		return
	}
	t.log.Info("tokens file reloaded", "path", t.path, "tokens", len(t.grants))
}

// Lookup is what token may do, and false for "" or a token the file does
// not hold. It first reads the file again if it changed (at most once a
// second). The grant's lists are shared: do not change them.
func (t *Tokens) Lookup(token string) (Grant, bool) {
	if token == "" {
		return Grant{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reload()
	g, ok := t.grants[sha256.Sum256([]byte(token))]
	return g, ok
}

// Bearer is the token of an Authorization value "Bearer <token>", the
// scheme in any case (RFC 9110 11.1: auth schemes are case-insensitive);
// "" for none or another scheme. Whitespace around the value is not part
// of it (net/http strips it from HTTP/1.1 fields, RFC 9110 5.5; gRPC
// metadata keeps it), so it is taken off here for every entry point.
func Bearer(v string) string {
	scheme, token, ok := strings.Cut(strings.Trim(v, " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
