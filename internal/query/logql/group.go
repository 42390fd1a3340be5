package logql

import (
	"slices"
	"strings"
)

// ByLabels collects values by label set: one *T per distinct labels,
// handed back in the order of their labels' text.
type ByLabels[T any] struct {
	m map[string]*T
}

// At is the value of ls, made by mk the first time.
func (b *ByLabels[T]) At(ls Labels, mk func() *T) *T {
	if b.m == nil {
		b.m = map[string]*T{}
	}
	k := ls.String()
	v := b.m[k]
	if v == nil {
		v = mk()
		b.m[k] = v
	}
	return v
}

// Sorted is the values in the order of their labels' text.
func (b *ByLabels[T]) Sorted() []*T {
	keys := make([]string, 0, len(b.m))
	for k := range b.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	out := make([]*T, len(keys))
	for i, k := range keys {
		out[i] = b.m[k]
	}
	return out
}
