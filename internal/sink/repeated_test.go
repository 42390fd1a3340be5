package sink

import (
	"slices"
	"testing"
)

// Repeated finds every offset held more than once, also under a run that
// reaches past the ones after it.
func TestRepeated(t *testing.T) {
	set := func(runs ...Run) *Offsets {
		var o Offsets
		for _, r := range runs {
			for x := r.First; x <= r.Last; x++ {
				o.Add(x)
			}
		}
		return &o
	}
	cases := []struct {
		sets []*Offsets
		want []Run
	}{
		{[]*Offsets{set(Run{0, 10}), set(Run{2, 3}, Run{5, 6})}, []Run{{2, 3}, {5, 6}}},
		{[]*Offsets{set(Run{0, 5}), set(Run{3, 8}), set(Run{7, 9})}, []Run{{3, 5}, {7, 8}}},
		{[]*Offsets{set(Run{0, 4}, Run{4, 4}), nil, set(Run{9, 9})}, []Run{{4, 4}}},
		{[]*Offsets{set(Run{0, 4}), set(Run{5, 9})}, nil},
	}
	for i, c := range cases {
		if got := Repeated(c.sets...); !slices.Equal(got, c.want) {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}
