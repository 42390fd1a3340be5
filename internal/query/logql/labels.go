package logql

import (
	"slices"
	"strconv"
	"strings"
)

// Category is where a label of an entry comes from, as Loki tells them
// apart (pkg/logql/log/labels.go: stream, structured metadata, parsed):
// answers with the categorize-labels encoding flag send each apart.
type Category uint8

// The categories.
const (
	CatStream Category = iota
	CatMetadata
	CatParsed
)

// Label is a label of an entry.
type Label struct {
	Name, Value string
	Cat         Category
}

// Labels are labels sorted by name, one per name.
type Labels []Label

// Get is the value of name, "" when absent.
func (ls Labels) Get(name string) (string, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

// String is the labels as Loki prints a stream: {a="1", b="2"}.
func (ls Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l.Name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// Only is the labels of category c.
func (ls Labels) Only(c Category) Labels {
	var out Labels
	for _, l := range ls {
		if l.Cat == c {
			out = append(out, l)
		}
	}
	return out
}

// Sort sorts ls by name in place, keeping the order of equal names, and
// returns it.
func (ls Labels) Sort() Labels {
	slices.SortStableFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// ErrorLabel and ErrorDetailsLabel are the labels a failed stage sets
// (Loki pkg/logqlmodel/error.go).
const (
	ErrorLabel        = "__error__"
	ErrorDetailsLabel = "__error_details__"
)

// The errors a stage reports in __error__ (Loki pkg/logqlmodel/error.go).
const (
	errJSON             = "JSONParserErr"
	errLogfmt           = "LogfmtParserErr"
	errLabelFilter      = "LabelFilterErr"
	errSampleExtraction = "SampleExtractionErr"
	errTemplateFormat   = "TemplateFormatErr"
)

// builder holds an entry's labels while its pipeline runs: a later
// stage's label replaces an earlier one of the same name, whatever its
// category.
type builder struct {
	ls Labels
	// errs counts the failures reported, recorded or not (setErr keeps
	// the first): a stage failed when it grew.
	errs int
	// preserved marks an entry whose parser failed in a query that
	// reads __error__: its sample is kept, not a pipeline error (Loki's
	// __preserve_error__ label, pkg/logql/log/parser.go addErrLabel).
	preserved bool
}

func (b *builder) reset(stream, meta Labels) {
	b.preserved = false
	b.ls = append(b.ls[:0], stream...)
	for _, l := range meta {
		b.set(CatMetadata, l.Name, l.Value)
	}
}

func (b *builder) index(name string) int {
	for i, l := range b.ls {
		if l.Name == name {
			return i
		}
	}
	return -1
}

func (b *builder) get(name string) (string, bool) {
	if i := b.index(name); i >= 0 {
		return b.ls[i].Value, true
	}
	return "", false
}

// has says whether name is a label of category c.
func (b *builder) has(name string, c Category) bool {
	i := b.index(name)
	return i >= 0 && b.ls[i].Cat == c
}

func (b *builder) set(c Category, name, value string) {
	if i := b.index(name); i >= 0 {
		b.ls[i] = Label{Name: name, Value: value, Cat: c}
		return
	}
	b.ls = append(b.ls, Label{Name: name, Value: value, Cat: c})
}

func (b *builder) del(name string) {
	if i := b.index(name); i >= 0 {
		b.ls = slices.Delete(b.ls, i, i+1)
	}
}

func (b *builder) hasErr() bool {
	_, ok := b.get(ErrorLabel)
	return ok
}

// setErr records a parser's, formatter's or unwrap's failure over any
// earlier one, its details too when it has some (Loki pkg/logql/log
// parser.go addErrLabel: SetErr, and SetErrorDetails only for an error).
func (b *builder) setErr(kind, details string) {
	b.errs++
	b.set(CatParsed, ErrorLabel, kind)
	if details != "" {
		b.set(CatParsed, ErrorDetailsLabel, details)
	}
}

// setErrFirst records a label filter's failure unless an earlier error
// was recorded (Loki pkg/logql/log/label_filter.go: "Don't overwrite what
// might be a more useful error").
func (b *builder) setErrFirst(kind, details string) {
	if b.hasErr() {
		b.errs++
		return
	}
	b.setErr(kind, details)
}

// labels is a sorted copy of the labels.
func (b *builder) labels() Labels {
	return slices.Clone(b.ls).Sort()
}

// sanitizeLabelName makes a key a label name as Loki's parsers do
// (pkg/logql/log/util.go sanitizeLabelKey): every character other than
// ASCII letters, digits and _ becomes _, and a leading digit gets a _.
func sanitizeLabelName(key string, prefix bool) string {
	key = strings.TrimSpace(key)
	if key == "" {
		return ""
	}
	if prefix && key[0] >= '0' && key[0] <= '9' {
		key = "_" + key
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, key)
}
