package tenancy

import (
	"errors"
	"strings"
	"testing"
)

const testTokens = `# tokens of the resolver tests
all-rw    write=* read=*
a-rw      write=team-a read=team-a
ab-rw     write=team-a,team-b read=team-a,team-b
old-a     team-a
old-all   *
a-w       write=team-a
a-r       read=team-a
ab-r      read=team-a,team-b
a-w-all-r write=team-a read=*
aa-r      read=team-a,team-a
`

// refused is a wanted refusal: its kind and a part of its message.
type refused struct {
	kind Kind
	msg  string
}

// checkRefusal says what is wrong with err against want (nil: no
// refusal wanted), or "".
func checkRefusal(err error, want *refused) string {
	if want == nil {
		if err != nil {
			return "refused: " + err.Error()
		}
		return ""
	}
	var e *Error
	switch {
	case err == nil:
		return "not refused"
	case !errors.As(err, &e):
		return "refused with a " + err.Error() + ", not an *Error"
	case e.Kind != want.kind || !strings.Contains(e.Msg, want.msg):
		return "refused " + kindName(e.Kind) + " " + e.Msg
	}
	return ""
}

func kindName(k Kind) string {
	return [...]string{Unauthenticated: "Unauthenticated", Forbidden: "Forbidden", Invalid: "Invalid"}[k]
}

// testResolvers are the resolvers the tests ask, each with "default" for
// Default: without tokens and with testTokens, each with and without
// Required; and the tokens, for other resolvers.
func testResolvers(t *testing.T) (open, required, tokens, tokensRequired Resolver, tk *Tokens) {
	tk = loadTokens(t, testTokens)
	return Resolver{Default: "default"}, Resolver{Default: "default", Required: true},
		Resolver{Tokens: tk, Default: "default"}, Resolver{Tokens: tk, Default: "default", Required: true}, tk
}

// resolveCase is one question to a resolver and the answer wanted: want,
// or the refusal.
type resolveCase[T comparable] struct {
	name        string
	r           Resolver
	sent, token string
	want        T
	wantRefusal *refused
}

// runResolve asks ask (Resolver.Write or Resolver.Read) each case.
func runResolve[T comparable](t *testing.T, name string, ask func(Resolver, string, string) (T, error), cases []resolveCase[T]) {
	t.Helper()
	for _, c := range cases {
		got, err := ask(c.r, c.sent, c.token)
		if msg := checkRefusal(err, c.wantRefusal); msg != "" || got != c.want {
			t.Errorf("%s: %s(%q, %q) = %#v %s, want %#v %+v", c.name, name, c.sent, c.token, got, msg, c.want, c.wantRefusal)
		}
	}
}

func TestResolverWrite(t *testing.T) {
	open, required, tokens, tokensRequired, _ := testResolvers(t)
	runResolve(t, "Write", Resolver.Write, []resolveCase[string]{
		{"no tenant: the default", open, "", "", "default", nil},
		{"the tenant sent", open, "team-a", "", "team-a", nil},
		{"a token without a file is ignored", open, "team-a", "anything", "team-a", nil},
		{"malformed tenant", open, "a/b", "", "", &refused{Invalid, `tenant id "a/b" has '/'`}},
		{"several tenants", open, "a|b", "", "", &refused{Invalid, `has '|'`}},
		{"an empty default", Resolver{}, "", "", "", &refused{Invalid, "empty tenant id"}},
		{"required, none sent", required, "", "", "", &refused{Unauthenticated, "a tenant is required: send it in X-Scope-OrgID"}},
		{"required, one sent", required, "team-a", "", "team-a", nil},

		{"no token", tokens, "team-a", "", "", &refused{Unauthenticated, "a valid bearer token is required"}},
		{"unknown token", tokens, "team-a", "guess", "", &refused{Unauthenticated, "a valid bearer token is required"}},
		{"malformed tenant before the token", tokens, "a/b", "guess", "", &refused{Invalid, "a/b"}},
		{"old form: its tenant", tokens, "team-a", "old-a", "team-a", nil},
		{"old form: another tenant", tokens, "team-b", "old-a", "", &refused{Forbidden, "the token may not write tenant team-b"}},
		{"old form: any", tokens, "team-z", "old-all", "team-z", nil},
		{"its tenant", tokens, "team-a", "a-rw", "team-a", nil},
		{"another tenant", tokens, "team-b", "a-rw", "", &refused{Forbidden, "the token may not write tenant team-b"}},
		{"one of several", tokens, "team-b", "ab-rw", "team-b", nil},
		{"any tenant", tokens, "team-z", "all-rw", "team-z", nil},
		{"no tenant: the default, which the token must hold", tokens, "", "a-rw", "", &refused{Forbidden, "may not write tenant default"}},
		{"no tenant: the default, held", tokens, "", "all-rw", "default", nil},
		{"required with a token, none sent", tokensRequired, "", "all-rw", "", &refused{Unauthenticated, "a tenant is required"}},
		{"write=", tokens, "team-a", "a-w", "team-a", nil},
		{"read= only", tokens, "team-a", "a-r", "", &refused{Forbidden, "may not write tenant team-a"}},
		{"reads any, writes one", tokens, "team-b", "a-w-all-r", "", &refused{Forbidden, "may not write tenant team-b"}},
	})
}

func TestResolverRead(t *testing.T) {
	open, required, tokens, tokensRequired, tk := testResolvers(t)
	runResolve(t, "Read", Resolver.Read, []resolveCase[Scope]{
		{"no tokens: the tenant sent", open, "team-a", "", One("team-a"), nil},
		{"no tokens: the default", open, "", "", One("default"), nil},
		{"no tokens: a token is ignored, never all tenants", open, "", "all-rw", One("default"), nil},
		{"no tokens: malformed", open, "a/b", "", Scope{}, &refused{Invalid, `tenant id "a/b"`}},
		{"no tokens: several tenants", open, "team-a|team-b", "", Scope{}, &refused{Invalid, `"team-a|team-b" names several tenants: a read serves one`}},
		{"no tokens: an empty default", Resolver{}, "", "", Scope{}, &refused{Invalid, "empty tenant id"}},
		{"no tokens, required: none sent", required, "", "", Scope{}, &refused{Unauthenticated, "a tenant is required"}},
		{"no tokens, required: one sent", required, "team-a", "", One("team-a"), nil},

		{"no token", tokens, "team-a", "", Scope{}, &refused{Unauthenticated, "a valid bearer token is required"}},
		{"unknown token", tokens, "team-a", "guess", Scope{}, &refused{Unauthenticated, "a valid bearer token is required"}},
		{"unknown token before a malformed tenant", tokens, "a/b", "guess", Scope{}, &refused{Unauthenticated, "bearer token"}},
		{"malformed tenant", tokens, "a/b", "all-rw", Scope{}, &refused{Invalid, `tenant id "a/b"`}},
		{"several tenants, all held", tokens, "team-a|team-b", "ab-r", Scope{}, &refused{Invalid, "a read serves one"}},
		{"old form writes only", tokens, "team-a", "old-a", Scope{}, &refused{Forbidden, "may not read tenant team-a"}},
		{"old form with *: no read, never every tenant", tokens, "", "old-all", Scope{}, &refused{Forbidden, "may not read any tenant"}},
		{"read and write: its tenant", tokens, "team-a", "a-rw", One("team-a"), nil},
		{"read and write: another tenant", tokens, "team-b", "a-rw", Scope{}, &refused{Forbidden, "the token may not read tenant team-b"}},
		{"read=: its tenant", tokens, "team-a", "a-r", One("team-a"), nil},
		{"read=: another tenant, not replaced", tokens, "team-b", "a-r", Scope{}, &refused{Forbidden, "may not read tenant team-b"}},
		{"read=: one of several", tokens, "team-b", "ab-r", One("team-b"), nil},
		{"write= only", tokens, "team-a", "a-w", Scope{}, &refused{Forbidden, "may not read tenant team-a"}},
		{"any: the tenant sent", tokens, "team-z", "all-rw", One("team-z"), nil},
		{"any: a tenant named * is that tenant", tokens, "*", "all-rw", One("*"), nil},
		{"none sent, one read: implied", tokens, "", "a-r", One("team-a"), nil},
		{"none sent, reads one: implied", tokens, "", "a-rw", One("team-a"), nil},
		{"none sent, reads one listed twice: implied", tokens, "", "aa-r", One("team-a"), nil},
		{"none sent, several read: pick one", tokens, "", "ab-r", Scope{}, &refused{Unauthenticated, "the token reads 2 tenants: name one in X-Scope-OrgID"}},
		{"none sent, several read: not the default", Resolver{Tokens: tk, Default: "team-a"}, "", "ab-r", Scope{}, &refused{Unauthenticated, "name one"}},
		{"none sent, reads any: every tenant", tokens, "", "all-rw", Operator, nil},
		{"none sent, reads any, writes one: every tenant", tokens, "", "a-w-all-r", Operator, nil},
		{"none sent, reads none", tokens, "", "a-w", Scope{}, &refused{Forbidden, "may not read any tenant"}},
		{"required does not override the token", tokensRequired, "", "a-r", One("team-a"), nil},
	})
}
