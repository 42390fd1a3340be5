package cdc

import (
	"bytes"
	"hash/maphash"
	"sync"
	"unsafe"
)

// canalTypesBytes bounds the memory of a decoder's canalTypeCache: ~16
// MiB holds the types of ~4,000 tables of 20 columns (a table's entry is
// its mysqlType and sqlType text, ~1.5 KB, and its parsed columns, ~100
// bytes each), several schema versions of the busiest among them. Past
// it, entries are evicted at random: a table whose entry was evicted has
// its types parsed again, as every message's were before the cache.
const canalTypesBytes = 16 << 20

// canalTypeCache holds the parsed column types of the Canal messages a
// decoder has read, by the exact text of their mysqlType and sqlType:
// Canal sends the same two with every message of a table until its schema
// changes, and parsing them (an ENUM's labels above all) was most of a
// message's garbage, again for every message. Safe for concurrent use;
// an entry's columns are never modified once made.
type canalTypeCache struct {
	seed maphash.Seed
	max  int // the bound of size, in bytes as entrySize counts them

	mu      sync.RWMutex
	entries map[uint64]*canalTypesEntry // by hash of the text
	size    int                         // the sum of the entries' size
}

// canalTypesEntry is the columns of one mysqlType and sqlType text, which
// it owns (the columns' names and sources point into it or are their own
// copies, never into a message).
type canalTypesEntry struct {
	mysqlTypes, sqlTypes []byte
	cols                 []canalColumn
	size                 int
}

func newCanalTypeCache(max int) *canalTypeCache {
	return &canalTypeCache{seed: maphash.MakeSeed(), max: max, entries: map[uint64]*canalTypesEntry{}}
}

// types returns the columns of a message's mysqlType and sqlType (raw
// JSON), as canalTypes lists them; the caller must not modify them. A
// nil cache parses them each time.
func (c *canalTypeCache) types(mysqlTypes, sqlTypes []byte) []canalColumn {
	if c == nil {
		return canalTypes(mysqlTypes, sqlTypes)
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.Write(mysqlTypes)
	h.WriteByte(0) // so that the text cannot be split otherwise
	h.Write(sqlTypes)
	key := h.Sum64()
	c.mu.RLock()
	e := c.entries[key]
	c.mu.RUnlock()
	// The text is compared, not only its hash: types taken from another
	// table's text would write its values with the wrong types.
	if e != nil && bytes.Equal(e.mysqlTypes, mysqlTypes) && bytes.Equal(e.sqlTypes, sqlTypes) {
		return e.cols
	}
	text := make([]byte, len(mysqlTypes)+len(sqlTypes))
	n := copy(text, mysqlTypes)
	copy(text[n:], sqlTypes)
	e = &canalTypesEntry{mysqlTypes: text[:n:n], sqlTypes: text[n:]}
	e.cols = canalTypes(e.mysqlTypes, e.sqlTypes)
	e.size = entrySize(e)
	if e.size > c.max {
		return e.cols // larger than the whole cache: parsed each time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[key]; old != nil {
		// Another decoder's copy of the same text, or (rarely) another
		// text of the same hash: the last one read stays.
		delete(c.entries, key)
		c.size -= old.size
	}
	for k, old := range c.entries {
		if c.size+e.size <= c.max {
			break
		}
		// A map's iteration starts at a random entry: a random eviction,
		// which needs no order kept on every hit, and evicts an entry in
		// use less often than the others when the tables read exceed the
		// bound.
		delete(c.entries, k)
		c.size -= old.size
	}
	c.entries[key] = e
	c.size += e.size
	return e.cols
}

// entrySize is about the memory e holds: its text, its columns and their
// labels, and the map's slot. A column's name and source are counted as
// their own copies (most point into the text): over, never under.
func entrySize(e *canalTypesEntry) int {
	n := int(unsafe.Sizeof(*e)) + 16 + len(e.mysqlTypes) + len(e.sqlTypes) + cap(e.cols)*int(unsafe.Sizeof(canalColumn{}))
	for _, c := range e.cols {
		n += len(c.name) + len(c.source) + cap(c.labels)*int(unsafe.Sizeof([]byte(nil)))
		for _, l := range c.labels {
			n += cap(l)
		}
	}
	return n
}
