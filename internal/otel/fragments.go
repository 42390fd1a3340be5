package otel

import (
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/schema"
)

// Fields that many rows share (a message's coordinates, a resource's
// tenant and service, a scope's names and the attributes of both) are
// written once into a fragment, which each row copies: 9 of a span's 29
// fields. A message's fragments share one buffer, taken from a pool:
// each its own buffer, grown from empty, allocated more than the copies
// saved.
type fragments struct{ b []byte }

var fragmentBuffers = sync.Pool{New: func() any { return &fragments{b: make([]byte, 0, 4096)} }}

// newFragments returns an empty buffer of fragments, to release once no
// fragment written into it is used.
func newFragments() *fragments {
	f := fragmentBuffers.Get().(*fragments)
	f.b = f.b[:0]
	return f
}

func (f *fragments) release() {
	if cap(f.b) <= 1<<20 { // a huge message's are not kept
		fragmentBuffers.Put(f)
	}
}

// write returns the fragment fill writes into a zero row: fields, each
// after a comma.
func (f *fragments) write(fill func(w *row)) []byte {
	start := len(f.b)
	w := row{b: f.b}
	fill(&w)
	f.b = w.b
	return w.b[start:len(w.b):len(w.b)]
}

// mark is where the next fragment written begins.
func (f *fragments) mark() int { return len(f.b) }

// drop forgets the fragments written since mark: the next ones take their
// bytes. Only once no row is still to copy them (a scope's, when its rows
// are written): a message holds its coordinates, one resource's fragments
// and one scope's at a time, not a copy of its resource's attributes for
// each of its scopes, empty or not (an 8 MiB message of a few thousand
// empty scopes under large resource attributes took terabytes).
func (f *fragments) drop(mark int) { f.b = f.b[:mark] }

// scopeLen is the length of scope(resource, s), found without copying
// resource.
func (f *fragments) scopeLen(resource []byte, s pcommon.InstrumentationScope) int {
	m := f.mark()
	n := len(f.scope(nil, s)) + len(resource)
	f.drop(m)
	return n
}

// head is the fragment that begins the rows of a resource (beginWith).
func (f *fragments) head(tenant, service string) []byte {
	return f.write(func(w *row) {
		w.begin()
		w.str("tenant_id", tenant)
		w.str("service_name", service)
	})
}

// attributes is the fragment of an attribute map as a JSON object.
func (f *fragments) attributes(m pcommon.Map) []byte {
	return f.write(func(w *row) { w.b = appendMap(w.b, m) })
}

// scope is the fragment of a resource's attributes (resource, from
// attributes) and a scope's names and attributes, which the rows of a
// scope share.
func (f *fragments) scope(resource []byte, scope pcommon.InstrumentationScope) []byte {
	return f.write(func(w *row) {
		w.raw("resource_attributes", resource)
		w.str("scope_name", scope.Name())
		w.str("scope_version", scope.Version())
		w.attrs("scope_attributes", scope.Attributes())
	})
}

// coordinates is the fragment of a message's coordinates up to each
// row's index (row.coordinates).
func (f *fragments) coordinates(src source) []byte {
	return f.write(func(w *row) { w.sourceUpToIndex(src) })
}

// beginWith begins a row with head, a fragment that begins one.
func (w *row) beginWith(head []byte) { w.b = append(w.b, head...); w.first = false }

// fragment writes the fields of fragment f.
func (w *row) fragment(f []byte) { w.b = append(w.b, f...) }

// coordinates writes the row's source columns; index is the row's place
// among its message's rows.
func (w *row) coordinates(src source, index int) {
	if src.coordinates != nil {
		w.fragment(src.coordinates)
	} else {
		w.sourceUpToIndex(src)
	}
	w.b = strconv.AppendInt(w.b, int64(index), 10)
}

// sourceUpToIndex writes the source columns but the index's value.
func (w *row) sourceUpToIndex(src source) {
	w.str(schema.TopicColumn, src.topic)
	w.int(schema.PartitionColumn, int64(src.partition))
	w.int(schema.OffsetColumn, src.offset)
	w.key(schema.IndexColumn)
}
