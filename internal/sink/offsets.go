package sink

import (
	"cmp"
	"slices"
)

// Offsets collects the offsets of one partition that a table scan finds,
// as runs of consecutive offsets. A scan reads each data file in the order
// its rows were loaded, so a partition's offsets come in a few long runs
// per file: memory grows with the runs, not with the rows (a map of every
// offset would not fit for a table of billions of rows).
type Offsets struct {
	runs  []Run
	count int64 // offsets added, with their repeats
	more  int64 // rows beyond a message's first (AddRow)
	// leastMore is the least offset of those rows (when more > 0).
	leastMore int64

	// RepeatedRows are rows beyond a message's first whose (offset,
	// index) another row has too: stored twice. Offsets by themselves
	// cannot tell (AddRow counts such rows without their index); the
	// scan's owner counts them where a table has an index (Iceberg's
	// declared tables).
	RepeatedRows int64
	// MissingRows are indexes of a message that no row has, below the
	// largest index stored of it (index 0 missing is a missing offset,
	// seen by the runs; a message's last rows missing cannot be seen:
	// nothing stored says how many rows it had).
	MissingRows int64
	// PastPosition are rows (any of a message's) at offsets at or past
	// their table's position of the partition, or of a partition it has
	// none for, as of the snapshot scanned: no load wrote them (a load
	// commits its rows with positions past them), and a load of those
	// offsets would store them again. PastFirst and PastLast are the
	// least and greatest of those offsets. Counted by the scan's owner
	// (Iceberg, whose positions are not ledger ranges verify can
	// compare rows with).
	PastPosition        int64
	PastFirst, PastLast int64
}

// Run is the offsets First through Last, each once.
type Run struct{ First, Last int64 }

// Add records one stored row at offset o.
func (s *Offsets) Add(o int64) {
	s.count++
	if n := len(s.runs); n > 0 && s.runs[n-1].Last+1 == o {
		s.runs[n-1].Last = o
		return
	}
	s.runs = append(s.runs, Run{o, o})
}

// AddRow records another row, at offset o, of a message (one message,
// many rows: an OTLP export request's spans). It is a row, not a repeat
// of the offset, which its message's first row adds.
func (s *Offsets) AddRow(o int64) {
	if s.more == 0 || o < s.leastMore {
		s.leastMore = o
	}
	s.more++
}

// LeastRow is the least offset of the rows AddRow recorded, and whether
// there are any: a message stored there, even if its first row (the one
// Add counts its offset by) is gone.
func (s *Offsets) LeastRow() (int64, bool) {
	if s == nil || s.more == 0 {
		return 0, false
	}
	return s.leastMore, true
}

// AddPast records that a row added (Add or AddRow) at offset o is past
// its table's position (PastPosition).
func (s *Offsets) AddPast(o int64) {
	if s.PastPosition == 0 {
		s.PastFirst, s.PastLast = o, o
	}
	s.PastPosition++
	s.PastFirst, s.PastLast = min(s.PastFirst, o), max(s.PastLast, o)
}

// Count is how many rows were added.
func (s *Offsets) Count() int64 { return s.count + s.more }

// Repeated returns the offsets that more than one row of sets (raw and
// dead-letter rows of one partition) holds, as sorted disjoint runs:
// where Coverage's duplicates are.
func Repeated(sets ...*Offsets) []Run {
	var all []Run
	for _, s := range sets {
		if s != nil {
			all = append(all, s.runs...)
		}
	}
	slices.SortFunc(all, func(a, b Run) int { return cmp.Compare(a.First, b.First) })
	var out []Run
	var reach int64 // the furthest offset of the runs before r
	for i, r := range all {
		if i > 0 && r.First <= reach {
			o := Run{First: r.First, Last: min(r.Last, reach)}
			if n := len(out); n > 0 && o.First <= out[n-1].Last+1 {
				out[n-1].Last = max(out[n-1].Last, o.Last)
			} else {
				out = append(out, o)
			}
		}
		if i == 0 || r.Last > reach {
			reach = r.Last
		}
	}
	return out
}

// Coverage merges the runs of sets (raw and dead-letter rows of one
// partition) and returns the distinct offsets as sorted disjoint runs,
// with the number of rows beyond the first of each offset (duplicates).
func Coverage(sets ...*Offsets) (union []Run, duplicates int64) {
	var all []Run
	var rows int64
	for _, s := range sets {
		if s != nil {
			all = append(all, s.runs...)
			rows += s.count
		}
	}
	slices.SortFunc(all, func(a, b Run) int { return cmp.Compare(a.First, b.First) })
	var distinct int64
	for _, r := range all {
		if n := len(union); n > 0 && r.First <= union[n-1].Last+1 {
			if r.Last > union[n-1].Last {
				distinct += r.Last - union[n-1].Last
				union[n-1].Last = r.Last
			}
			continue
		}
		union = append(union, r)
		distinct += r.Last - r.First + 1
	}
	return union, rows - distinct
}
