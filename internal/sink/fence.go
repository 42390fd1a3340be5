package sink

// Overlap says how a staged file's offsets relate to what a partition's
// ledger already holds.
type Overlap int

const (
	OverlapNone    Overlap = iota // nothing in the file is loaded yet
	OverlapPartial                // some rows are at or below a fence
	OverlapAll                    // every range is at or below its fence: nothing to load
)

// Overlap classifies f against fence, the last loaded offset per partition
// (partitions without one are absent).
func (f File) Overlap(fence map[TopicPartition]int64) Overlap {
	loaded, touched := 0, false
	for _, r := range f.Ranges {
		last, ok := fence[r.TopicPartition]
		if !ok || r.First > last {
			continue
		}
		touched = true
		if r.Last <= last {
			loaded++
		}
	}
	switch {
	case !touched:
		return OverlapNone
	case loaded == len(f.Ranges):
		return OverlapAll
	default:
		return OverlapPartial
	}
}

// Fenced is what a load of files writes once rows at or below each
// partition's fence are skipped.
type Fenced struct {
	// Ranges are merged per partition, in the order the files list them,
	// and start past the fence.
	Ranges []Range
	// Exact is false when rows were fenced: the ranges' counts include
	// skipped rows and must be counted in the table.
	Exact bool
	// Skip lists the partitions with fenced rows and the last offset to
	// skip, in first-seen order.
	Skip []Range // First unused; Last is the fence
}

// Fence applies fence (last loaded offset per partition) to files.
func Fence(files []File, fence map[TopicPartition]int64) Fenced {
	out := Fenced{Exact: true}
	merged := map[TopicPartition]*Range{}
	var order []TopicPartition
	skipped := map[TopicPartition]bool{}
	for _, f := range files {
		for _, r := range f.Ranges {
			if last, ok := fence[r.TopicPartition]; ok && r.First <= last {
				out.Exact = false
				if !skipped[r.TopicPartition] {
					skipped[r.TopicPartition] = true
					out.Skip = append(out.Skip, Range{TopicPartition: r.TopicPartition, Last: last})
				}
				if r.Last <= last {
					continue // wholly loaded before
				}
				r.First = last + 1
			}
			m, ok := merged[r.TopicPartition]
			if !ok {
				rc := r
				merged[r.TopicPartition] = &rc
				order = append(order, r.TopicPartition)
				continue
			}
			m.First = min(m.First, r.First)
			m.Last = max(m.Last, r.Last)
			m.Records += r.Records
			m.DLQ += r.DLQ
			if m.TopicID == "" {
				m.TopicID = r.TopicID
			}
		}
	}
	for _, tp := range order {
		out.Ranges = append(out.Ranges, *merged[tp])
	}
	return out
}

// Runs cuts a load's files (in the order their batches were read) into
// runs in which no two files cover an offset of the same partition: a
// partition that came back to the same worker while files of it were
// pending is read again, and the re-read file covers offsets an earlier
// file of the same load holds. A sink's fence is the ledger as it was
// before the load, which both files pass; a sink loads the runs in order,
// each fenced by the fence advanced past the runs before it (Advance), so
// the fence is cumulative within a load.
func Runs(files []File) [][]File {
	var runs [][]File
	start := 0
	last := map[TopicPartition]int64{}
	for i, f := range files {
		if Overlaps(last, f.Ranges) {
			runs = append(runs, files[start:i])
			start = i
			clear(last)
		}
		Advance(last, f.Ranges)
	}
	if start < len(files) {
		runs = append(runs, files[start:])
	}
	return runs
}

// Overlaps reports whether ranges cover an offset at or below fence's
// (the last offset per partition of the files before them): a partition
// read again.
func Overlaps(fence map[TopicPartition]int64, ranges []Range) bool {
	for _, r := range ranges {
		if last, ok := fence[r.TopicPartition]; ok && r.First <= last {
			return true
		}
	}
	return false
}

// Advance moves fence (the last loaded offset per partition) past ranges:
// the fence of what a load takes after them.
func Advance(fence map[TopicPartition]int64, ranges []Range) {
	for _, r := range ranges {
		if l, ok := fence[r.TopicPartition]; !ok || r.Last > l {
			fence[r.TopicPartition] = r.Last
		}
	}
}
