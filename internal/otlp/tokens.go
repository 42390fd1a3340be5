package otlp

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
// may write, read from a file and read again when the file changes. Each
// line of the file is a token and its tenants, comma-separated, or * for
// any tenant:
//
//	s3cr3t-team-a team-a
//	s3cr3t-ops    team-a,team-b
//	s3cr3t-admin  *
//
// Blank lines and lines starting with # are skipped. Tokens are kept as
// SHA-256 hashes and never logged.
type Tokens struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time // last look at the file
	stamp   fileStamp // the file as last read
	tenants map[[32]byte][]string
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// tokenVerdict says what a token may do for a tenant.
type tokenVerdict int

const (
	tokenAllowed tokenVerdict = iota
	tokenUnknown
	tokenOtherTenant
)

// reloadEvery bounds how often the file is looked at for a change.
const reloadEvery = time.Second

// LoadTokens reads the tokens file.
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	t := &Tokens{path: path, log: log}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	if err := t.read(fileStamp{st.ModTime(), st.Size()}); err != nil {
		return nil, err
	}
	t.checked = time.Now()
	return t, nil
}

func (t *Tokens) read(stamp fileStamp) error {
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	tenants := map[[32]byte][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return fmt.Errorf("tokens file %s, line %d: want a token and its tenants (comma-separated, or *)", t.path, n)
		}
		tenants[sha256.Sum256([]byte(fields[0]))] = strings.Split(fields[1], ",")
	}
	t.tenants, t.stamp = tenants, stamp
	return nil
}

// reload reads the file again if it changed; a file that no longer reads
// keeps the tokens as they were (and says so in the log).
func (t *Tokens) reload() {
	if time.Since(t.checked) < reloadEvery {
		return
	}
	t.checked = time.Now()
	st, err := os.Stat(t.path)
	if err == nil && (fileStamp{st.ModTime(), st.Size()}) == t.stamp {
		return
	}
	if err == nil {
		err = t.read(fileStamp{st.ModTime(), st.Size()})
	}
	if err != nil {
		t.log.Error("tokens file not reloaded; the previous tokens stay", "err", err)
		return
	}
	t.log.Info("tokens file reloaded", "path", t.path, "tokens", len(t.tenants))
}

// Allows says whether token may write tenant.
func (t *Tokens) Allows(token, tenant string) tokenVerdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reload()
	tenants, ok := t.tenants[sha256.Sum256([]byte(token))]
	switch {
	case !ok || token == "":
		return tokenUnknown
	case slices.Contains(tenants, "*") || slices.Contains(tenants, tenant):
		return tokenAllowed
	default:
		return tokenOtherTenant
	}
}
