package merge

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// remergeCheck: a chunked merge stopped in its second chunk (or done),
// then its watermarks lowered to the start (as a held watermark, at a
// replayed dead letter, makes the next merge read from there), merges
// again into the model one merge gives: a change merged twice changes
// nothing (TOAST fills from the model's row, key changes, deletes,
// tombstones, truncations).
func remergeCheck(t *testing.T, events func(l *changeLoader)) {
	q := `SELECT id, v, coalesce(md5(doc), 'NULL') FROM cdc_shop_docs ORDER BY id`
	whole := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 4 << 30 })
	events(whole)
	whole.mustMerge()
	want := dump(t, whole.s.DB(), q)
	for _, mode := range []string{"crash2", "full"} {
		chunked := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20 })
		events(chunked)
		chunks := 0
		failAfterMerge = func() error {
			chunks++
			if mode == "crash2" && chunks == 2 {
				return errors.New("injected")
			}
			return nil
		}
		chunked.mergeAll()
		failAfterMerge = nil
		if _, err := chunked.s.DB().Exec(`UPDATE tracelake_merge_watermarks SET next_offset = 0`); err != nil {
			t.Fatal(err)
		}
		chunked.mustMerge()
		if got := dump(t, chunked.s.DB(), q); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", mode, got, want)
		}
	}
}

func TestChangelogChunksMergedAgainGiveTheModelOneMergeGives(t *testing.T) {
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
	remergeCheck(t, events)
}

func TestChangelogChunksMergedAgainGiveTheModelOneMergeGivesTruncated(t *testing.T) {
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
	remergeCheck(t, events)
}
