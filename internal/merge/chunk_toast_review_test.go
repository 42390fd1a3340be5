package merge

import (
	"crypto/md5"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// An increment merged in chunks gives the model one merge of it gives,
// with values left unread (Debezium's TOAST placeholder) and primary-key
// changes: a key's create in the first chunk and its unread update in
// the second (the value from the model's row), a delete in the first and
// an unread update in the second (NULL), a key change whose delete is in
// the first chunk and create in the second (another partition), one whose
// delete and create are both in the second, and a key's later change
// merged (first chunk) before its earlier one on the partition cut away.
func md5hex(s string) string { return fmt.Sprintf("%x", md5.Sum([]byte(s))) }

func TestChangelogChunksGiveTheModelOneMergeGives(t *testing.T) {
	big := func(c byte) string { return fmt.Sprintf("%q", strings.Repeat(string(c), 12<<20)) }
	events := func(l *changeLoader) {
		e := pgToast{l: l}
		e.event("c", 100, 1, "a", big('1'))
		l.flush() // a load each big value, as the pipeline cuts them
		e.event("c", 101, 6, "a", `"s6"`)
		e.event("d", 102, 6, "", `null`)
		e.event("c", 103, 9, "a", `"s9"`)
		e.event("d", 104, 9, "", `null`) // UPDATE docs SET id = 11 WHERE id = 9
		e.event("c", 300, 20, "late", `"d20"`)
		e.event("c", 105, 8, "a", big('8'))
		l.flush()
		e.event("c", 106, 12, "a", big('c')) // the first chunk ends here
		l.flush()
		e.event("u", 110, 1, "b", toastPlaceholder)
		e.event("u", 111, 6, "b", toastPlaceholder)
		e.event("c", 130, 7, "b", toastPlaceholder) // UPDATE docs SET id = 7 WHERE id = 8
		e.partition = 1
		e.event("c", 104, 11, "b", toastPlaceholder)
		e.event("d", 130, 8, "", `null`)
		e.event("c", 200, 20, "early", `"e20"`)
		l.flush()
	}
	q := `SELECT id, v, coalesce(md5(doc), 'NULL') FROM cdc_shop_docs ORDER BY id`
	whole := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 4 << 30 })
	events(whole)
	if res := whole.mustMerge(); res["cdc_shop_docs"].Read != 14 {
		t.Fatalf("one merge read %+v", res)
	}
	want := dump(t, whole.s.DB(), q)
	chunked := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20 })
	events(chunked)
	chunks := 0
	failAfterMerge = func() error { chunks++; return nil }
	chunked.mustMerge()
	failAfterMerge = nil
	if chunks != 2 {
		t.Fatalf("the merge took %d chunks, want 2", chunks)
	}
	if got := dump(t, chunked.s.DB(), q); !slices.Equal(got, want) {
		t.Errorf("chunked: got %v, want %v", got, want)
	}
	for _, w := range []string{"1|b|" + md5hex(strings.Repeat("1", 12<<20)), "6|b|NULL", "7|b|" + md5hex(strings.Repeat("8", 12<<20)),
		"11|b|" + md5hex("s9"), "20|late|" + md5hex("d20")} {
		if !slices.Contains(want, w) {
			t.Errorf("one merge: %v lacks %s", want, w)
		}
	}
}

// As TestChangelogChunksGiveTheModelOneMergeGives, with a Debezium
// tombstone in the first chunk and a truncation in the second, changes on
// the other partition on both sides of it.
func TestChangelogChunksGiveTheModelOneMergeGivesTruncated(t *testing.T) {
	big := func(c byte) string { return fmt.Sprintf("%q", strings.Repeat(string(c), 12<<20)) }
	events := func(l *changeLoader) {
		e := pgToast{l: l}
		e.event("c", 100, 1, "a", big('1'))
		l.flush()
		e.event("c", 101, 2, "a", `"s2"`)
		e.event("d", 102, 2, "", `null`)
		l.rawKey(0, "pg.public.docs", `{"id":2}`, "")
		e.event("c", 103, 3, "a", big('3'))
		l.flush()
		e.event("c", 104, 4, "a", big('4')) // the first chunk ends here
		l.flush()
		e.event("u", 150, 1, "b", toastPlaceholder)
		l.rawKey(0, "pg.public.docs", `{"id":1}`, `{"before":null,"after":null,"op":"t","ts_ms":1700000000001,`+
			`"source":{"connector":"postgresql","name":"pg","db":"shop","schema":"public","table":"docs","lsn":160,"sequence":"[\"160\",\"160\"]","ts_ms":1700000000000}}`)
		e.event("c", 170, 5, "a", `"s5"`)
		e.event("u", 180, 5, "b", toastPlaceholder)
		e.partition = 1
		e.event("c", 155, 6, "a", `"s6"`)
		e.event("c", 165, 7, "a", `"s7"`)
		e.event("u", 190, 3, "b", toastPlaceholder)
		l.flush()
	}
	q := `SELECT id, v, coalesce(md5(doc), 'NULL') FROM cdc_shop_docs ORDER BY id`
	whole := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 4 << 30 })
	events(whole)
	whole.mustMerge()
	want := dump(t, whole.s.DB(), q)
	chunked := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20 })
	events(chunked)
	chunks := 0
	failAfterMerge = func() error { chunks++; return nil }
	chunked.mustMerge()
	failAfterMerge = nil
	if chunks != 2 {
		t.Fatalf("the merge took %d chunks, want 2", chunks)
	}
	if got := dump(t, chunked.s.DB(), q); !slices.Equal(got, want) {
		t.Errorf("chunked: got %v, want %v", got, want)
	}
	for _, w := range []string{"5|b|" + md5hex("s5"), "7|a|" + md5hex("s7")} {
		if !slices.Contains(want, w) {
			t.Errorf("one merge: %v lacks %s", want, w)
		}
	}
}
