package tempo

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// bigIDs is a trace whose two spans carry int attributes past 2^53,
// where doubles no longer tell neighbouring integers apart: ids such as
// snowflake user ids (about 1.8e18) look like this.
func bigIDs(t *testing.T) *fixture {
	t.Helper()
	const tr = "abcdef0123456789abcdef0123456789"
	return newFixtureSpans(t, []span{
		{tr, "a000000000000001", "", "svc", "user-1", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second,
			map[string]any{"user.id": int64(1_800_000_000_000_000_001)}},
		{tr, "a000000000000002", "a000000000000001", "svc", "user-0", ptrace.SpanKindClient, ptrace.StatusCodeUnset, time.Millisecond, time.Millisecond,
			map[string]any{"user.id": int64(1_800_000_000_000_000_000)}},
	})
}

// TestIntAttributeComparesExactlyWithIntLiteral: Tempo compares an int
// attribute with an int literal as int64s (pkg/traceql/ast_execute.go
// BinaryOperation.execute, "case lhsT == TypeInt && rhsT == TypeInt";
// Static.Equals compares the int64s, pkg/traceql/ast.go; the fetch layer
// too, tempodb/encoding/vparquet4/block_traceql.go createIntPredicate).
// So `{ span.user.id = 1800000000000000000 }` matches that user's span
// alone, not its neighbour's one id up, and `> 1800000000000000000`
// matches the neighbour's. Both ids are the same double.
func TestIntAttributeComparesExactlyWithIntLiteral(t *testing.T) {
	f := bigIDs(t)
	const id = "abcdef0123456789abcdef0123456789"
	for _, c := range []struct {
		q    string
		want []string
	}{
		{`{ span.user.id = 1800000000000000000 }`, []string{id + ": user-0 (1)"}},
		{`{ .user.id = 1800000000000000001 }`, []string{id + ": user-1 (1)"}},
		{`{ span.user.id != 1800000000000000000 }`, []string{id + ": user-1 (1)"}},
		{`{ span.user.id > 1800000000000000000 }`, []string{id + ": user-1 (1)"}},
		{`{ span.user.id <= 1800000000000000000 }`, []string{id + ": user-0 (1)"}},
	} {
		code, got, body := f.searchStatus(c.q)
		if code != 200 || !slices.Equal(got, c.want) {
			t.Errorf("%s: %d %s %q, want 200 %q", c.q, code, body, got, c.want)
		}
	}
}

// TestBooleanOrderingRefused: Tempo's validation refuses ordering a
// boolean, `{ span.sampled > false }` being 400 "illegal operation for
// the given types" (pkg/traceql/ast_validate.go BinaryOperation.validate,
// enum_operators.go binaryTypeValid: TypeBoolean takes = and != alone),
// not an answer of the spans whose flag is true.
func TestBooleanOrderingRefused(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{`{ span.sampled > false }`, `{ .sampled <= true }`, `{ false < span.sampled }`} {
		if code, got, _ := f.searchStatus(q); code != 400 {
			t.Errorf("%s: %d %q, want 400", q, code, got)
		}
	}
	if code, got, body := f.searchStatus(`{ span.sampled != false }`); code != 200 || !slices.Equal(got, []string{checkoutID + ": GET /api (1)"}) {
		t.Errorf("{ span.sampled != false }: %d %s %q, want the checkout root", code, body, got)
	}
}

// TestSearchRootWithoutServiceName: Tempo's frontend writes "<root span
// not yet received>" for every trace whose root service name is empty
// (modules/frontend/combiner/search.go addRootSpanNotReceivedText: "if
// tr.RootServiceName == \"\""), a root whose resource names no service
// included, not only for a trace without a root.
func TestSearchRootWithoutServiceName(t *testing.T) {
	const tr = "abcdef0123456789abcdef0123456789"
	f := newFixtureSpans(t, []span{
		{tr, "a000000000000001", "", "", "root", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second, nil},
	})
	got := f.search("a", url.Values{"q": {`{}`}})
	if len(got.Traces) != 1 || got.Traces[0].RootServiceName != rootSpanNotYetReceived {
		t.Errorf("root without a service: %+v, want rootServiceName %q", got.Traces, rootSpanNotYetReceived)
	}
}
