package logql

import (
	"regexp"
	"strconv"
	"strings"
)

// Entry is a log entry as a Source gives it: time in Unix nanoseconds,
// the line, the stream's labels and the entry's structured metadata.
type Entry struct {
	TS       int64
	Line     string
	Stream   Labels
	Metadata Labels
}

// pipeline runs the stages a Source did not, on one entry at a time.
type pipeline struct {
	stages []Stage
	unwrap *Unwrap
	// keepUnwrapped keeps the unwrapped label in a sample's labels: a
	// range aggregation grouped by labels, which keeps it if it is one.
	keepUnwrapped bool
	hints         parserHints
	b             builder
}

// pushable splits stages into the line filters a Source applies (those
// on the line as read, before any line_format or decolorize changes it,
// whose operators a query engine has: |= != |~ !~) and the stages left.
// A line filter never changes labels, so running it first changes no
// answer.
func pushable(stages []Stage) (filters []*LineFilter, rest []Stage) {
	lineChanged := false
	for _, s := range stages {
		switch x := s.(type) {
		case *LineFormat, *Decolorize:
			lineChanged = true
		case *Parser:
			if x.Kind == ParseUnpack {
				lineChanged = true
			}
		case *LineFilter:
			if !lineChanged && x.Op != LinePattern && x.Op != LineNotPattern {
				filters = append(filters, x)
				continue
			}
		}
		rest = append(rest, s)
	}
	return filters, rest
}

// dropsEntries says whether stages may drop entries (so a Source cannot stop
// at a limit for them).
func dropsEntries(stages []Stage) bool {
	for _, s := range stages {
		switch s.(type) {
		case *LineFilter, *LabelFilterStage:
			return true
		}
	}
	return false
}

// process runs the pipeline on e: the line and labels after it, or ok
// false when a stage drops the entry.
func (p *pipeline) process(e *Entry) (line string, ok bool) {
	p.b.reset(e.Stream, e.Metadata)
	line = e.Line
	for _, s := range p.stages {
		switch x := s.(type) {
		case *LineFilter:
			if !x.Keeps(line) {
				return line, false
			}
		case *Parser:
			if p.hints.skipParsers {
				continue
			}
			errs := p.b.errs
			x.process(line, &p.b)
			if x.Kind == ParseUnpack {
				line = unpackedLine(line)
			}
			if p.hints.preserveErr && p.b.errs > errs {
				p.b.preserved = true
			}
		case *LabelFilterStage:
			if !filterLabels(x.Filter, &p.b) {
				return line, false
			}
		case *LineFormat:
			line, _ = x.tmpl.run(line, e.TS, &p.b)
		case *LabelFormat:
			formatLabels(x, line, e.TS, &p.b)
		case *DropKeep:
			dropKeep(x, &p.b)
		case *Decolorize:
			line = ansi.ReplaceAllString(line, "")
		}
	}
	return line, true
}

// sample is the value of e for a range aggregation: 1 a line, its
// length in bytes, or the unwrapped label's value (removed from the
// labels, as Loki does); ok false when the entry gives none. An entry
// without the unwrapped label, or with it empty, gives none and no error
// (Loki pkg/logql/log/metrics_extraction.go, grafana/loki#6713): a line
// that does not carry the value is not a failed conversion.
func (p *pipeline) sample(e *Entry, op string) (float64, bool) {
	line, ok := p.process(e)
	if !ok {
		return 0, false
	}
	switch {
	case p.unwrap != nil:
		v, _ := p.b.get(p.unwrap.Label)
		if v == "" {
			return 0, false
		}
		f, err := convertUnwrapped(p.unwrap.Conv, v)
		if err != nil {
			p.b.setErr(errSampleExtraction, err.Error())
		}
		// The filters after unwrap read the unwrapped label too (Loki
		// pkg/logql/log/metrics_extraction.go
		// streamLabelSampleExtractor.Process runs them on the labels as
		// they are); the series then leaves it out, unless grouped by
		// it or failed (LabelExtractorWithStages adds it to a without
		// grouping; pkg/logql/log/labels.go GroupedLabels keeps every
		// label of an entry with an error).
		for _, f := range p.unwrap.PostFilters {
			if !filterLabels(f, &p.b) {
				return 0, false
			}
		}
		if !p.keepUnwrapped && !p.b.hasErr() {
			p.b.del(p.unwrap.Label)
		}
		return f, true
	case op == "bytes_over_time" || op == "bytes_rate":
		return float64(len(line)), true
	}
	return 1, true
}

func convertUnwrapped(conv, v string) (float64, error) {
	switch conv {
	case "duration", "duration_seconds":
		return durationOf(v)
	case "bytes":
		b, err := ParseBytes(v)
		return float64(b), err
	}
	return strconv.ParseFloat(strings.TrimSpace(v), 64)
}

// ansi is what decolorize removes: Loki's pattern (pkg/logql/log/fmt.go
// ansiPattern, after acarl005/stripansi), which takes private-mode CSI
// sequences (ESC[?25l) and OSC sequences ended by BEL (ESC]0;title BEL)
// too, not only colours.
var ansi = regexp.MustCompile("[\u001b\u009b][[\\]()#;?]*(?:(?:(?:[a-zA-Z\\d]*(?:;[a-zA-Z\\d]*)*)?\u0007)|(?:(?:\\d{1,4}(?:;\\d{0,4})*)?[\\dA-PRZcf-ntqry=><~]))")

// Keeps says whether the filter keeps line.
func (f *LineFilter) Keeps(line string) bool {
	found := false
	for i, v := range f.Values {
		switch f.Op {
		case LineContains, LineNotContains:
			found = strings.Contains(line, v)
		case LineMatch, LineNotMatch:
			found = f.res[i].MatchString(line)
		case LinePattern, LineNotPattern:
			found = testPattern(f.pats[i], line)
		}
		if found {
			break
		}
	}
	if f.Op.Negated() {
		return !found
	}
	return found
}

// filterLabels runs a label filter (Loki pkg/logql/log/label_filter.go):
// a numeric, duration or bytes filter drops an entry without the label,
// and keeps one whose label does not read as its type, marked
// LabelFilterErr.
func filterLabels(f LabelFilter, b *builder) bool {
	switch x := f.(type) {
	case *StringFilter:
		v, _ := b.get(x.Matcher.Name)
		return x.Matcher.Matches(v)
	case *BinaryFilter:
		// The right side of an or whose left holds never runs, so it
		// sets no LabelFilterErr on a line the left keeps (Loki
		// pkg/logql/log/label_filter.go BinaryLabelFilter.Process).
		l := filterLabels(x.Left, b)
		if x.And {
			return l && filterLabels(x.Right, b)
		}
		return l || filterLabels(x.Right, b)
	case *NumberFilter:
		return filterNumber(b, x.Name, x.Op, x.Value, func(v string) (float64, error) {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		})
	case *DurationFilter:
		return filterNumber(b, x.Name, x.Op, float64(x.Value), func(v string) (float64, error) {
			d, err := ParseDuration(v)
			return float64(d), err
		})
	case *BytesFilter:
		return filterNumber(b, x.Name, x.Op, float64(x.Value), func(v string) (float64, error) {
			n, err := ParseBytes(v)
			return float64(n), err
		})
	}
	return false
}

// filterNumber compares label name, read by parse, with value.
func filterNumber(b *builder, name string, op CmpOp, value float64, parse func(string) (float64, error)) bool {
	v, ok := b.get(name)
	if !ok {
		return false
	}
	n, err := parse(v)
	if err != nil {
		b.setErrFirst(errLabelFilter, err.Error())
		return true
	}
	return compare(op, n, value)
}

func compare(op CmpOp, a, b float64) bool {
	switch op {
	case "==":
		return a == b
	case "!=":
		return a != b
	case ">":
		return a > b
	case ">=":
		return a >= b
	case "<":
		return a < b
	case "<=":
		return a <= b
	}
	return false
}

// formatLabels runs label_format's items in order, as Loki's
// LabelsFormatter (pkg/logql/log/fmt.go): a rename sets its label and
// removes its source at once; templates read the labels as they were
// when the first template ran, so they see earlier renames but not the
// labels set by earlier templates. A failing template sets no label.
func formatLabels(lf *LabelFormat, line string, ts int64, b *builder) {
	var data map[string]string
	for _, it := range lf.Items {
		if it.tmpl == nil {
			if v, ok := b.get(it.Src); ok {
				b.set(CatParsed, it.Dst, v)
				if it.Src != it.Dst {
					b.del(it.Src)
				}
			}
			continue
		}
		if data == nil {
			data = templateData(b)
		}
		if v, ok := it.tmpl.runOn(line, ts, data, b); ok {
			b.set(CatParsed, it.Dst, v)
		}
	}
}

// dropKeep runs drop and keep: an item by name matches the label of
// that name, an item with a matcher only when its value matches. keep
// never removes __error__ and __error_details__ (Loki
// pkg/logql/log/keep_labels.go skips them), so a failed stage still
// fails a metric query and still matches an __error__ filter; drop
// removes them when named, the documented way to ignore an error.
func dropKeep(d *DropKeep, b *builder) {
	matches := func(l Label) bool {
		for _, it := range d.Items {
			if it.Name != l.Name {
				continue
			}
			if it.Matcher == nil || it.Matcher.Matches(l.Value) {
				return true
			}
		}
		return false
	}
	kept := b.ls[:0]
	for _, l := range b.ls {
		if matches(l) == d.Keep || d.Keep && (l.Name == ErrorLabel || l.Name == ErrorDetailsLabel) {
			kept = append(kept, l)
		}
	}
	b.ls = kept
}
