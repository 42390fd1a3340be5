package logql

import (
	"slices"
	"strings"
)

// ByLabels collects values by label set: one *T per distinct labels,
// handed back in the order of their labels (by name, then value).
type ByLabels[T any] struct {
	m map[string]*T
}

// At is the value of ls, made by mk the first time.
func (b *ByLabels[T]) At(ls Labels, mk func() *T) *T {
	if b.m == nil {
		b.m = map[string]*T{}
	}
	k := ls.key()
	v := b.m[k]
	if v == nil {
		v = mk()
		b.m[k] = v
	}
	return v
}

// Sorted is the values in the order of their labels.
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

// key is the labels as a map key: cheaper than String, which quotes, and
// in the same order for sorted labels (the separators sort below every
// printable character).
func (ls Labels) key() string {
	n := 0
	for _, l := range ls {
		n += len(l.Name) + len(l.Value) + 2
	}
	b := make([]byte, 0, n)
	for _, l := range ls {
		b = append(b, l.Name...)
		b = append(b, 0)
		b = append(b, l.Value...)
		b = append(b, 1)
	}
	return string(b)
}
