package sink

import "testing"

// Files whose ranges overlap (a partition read again while its first file
// was pending) are cut into runs, and each run's fence is advanced past
// the runs before it.
func TestRuns(t *testing.T) {
	file := func(ranges ...Range) File { return File{Ranges: ranges} }
	r := func(p int32, first, last int64) Range {
		return Range{TopicPartition: TopicPartition{Topic: "t", Partition: p}, First: first, Last: last}
	}
	files := []File{file(r(0, 0, 9)), file(r(1, 0, 9)), file(r(0, 10, 19)), file(r(0, 5, 14), r(1, 10, 19)), file(r(0, 15, 24))}
	runs := Runs(files)
	var sizes []int
	for _, run := range runs {
		sizes = append(sizes, len(run))
	}
	// The fourth file reads 5-14 of partition 0 again: a new run. The
	// fifth overlaps only the third, which is in the run before.
	if len(sizes) != 2 || sizes[0] != 3 || sizes[1] != 2 {
		t.Fatalf("runs of %v files, want [3 2]", sizes)
	}
	fence := map[TopicPartition]int64{{Topic: "t", Partition: 1}: 5}
	for _, f := range runs[0] {
		Advance(fence, f.Ranges)
	}
	if fence[TopicPartition{Topic: "t", Partition: 0}] != 19 || fence[TopicPartition{Topic: "t", Partition: 1}] != 9 {
		t.Errorf("fence after the first run %v, want t/0 at 19 and t/1 at 9", fence)
	}
	// Its t/0 rows are all in the run before, its t/1 rows all past it.
	if got := runs[1][0].Overlap(fence); got != OverlapPartial {
		t.Errorf("the re-read file against the advanced fence: %v, want partial", got)
	}
}
