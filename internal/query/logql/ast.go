// Package logql reads LogQL, Loki's query language, and evaluates it
// over log entries a Source selects. The subset is the one Grafana's
// Explore, its log volume and Loki's health check send: stream
// selectors, line filters, the json, logfmt, regexp and pattern parsers,
// label filters, line_format, label_format, drop and keep, unwrap, range
// aggregations, vector aggregations, vector(), literals and binary
// operations. The grammar and the meaning follow grafana/loki
// (pkg/logql/syntax/expr.y, pkg/logql/log, pkg/logql/range_vector.go,
// pkg/logql/evaluator.go): Loki's own package could not be used, since it
// builds only with the replace directives of Loki's go.mod.
package logql

import (
	"regexp"
	"time"
)

// Expr is a parsed query: a *LogExpr (a log query) or a metric
// expression (*RangeAggr, *VectorAggr, *BinaryExpr, *Literal,
// *VectorLit).
type Expr interface{ expr() }

// MatchOp is a label matcher's or a string label filter's operator.
type MatchOp string

// The matcher operators.
const (
	MatchEq    MatchOp = "="
	MatchNotEq MatchOp = "!="
	MatchRe    MatchOp = "=~"
	MatchNotRe MatchOp = "!~"
	matchEqEq  MatchOp = "==" // a label filter's synonym of =
)

// Matcher is a label matcher: name op "value". Regular expressions are
// anchored at both ends, as Prometheus's are.
type Matcher struct {
	Name  string
	Op    MatchOp
	Value string
	re    *regexp.Regexp
}

// Matches says whether v (the label's value, "" when absent) matches.
func (m *Matcher) Matches(v string) bool {
	switch m.Op {
	case MatchEq:
		return v == m.Value
	case MatchNotEq:
		return v != m.Value
	case MatchRe:
		return m.re.MatchString(v)
	case MatchNotRe:
		return !m.re.MatchString(v)
	}
	return false
}

// LogExpr is a log query: a stream selector and its pipeline.
type LogExpr struct {
	Matchers []*Matcher
	Stages   []Stage
}

// Stage is a pipeline stage: *LineFilter, *Parser, *LabelFilterStage,
// *LineFormat, *LabelFormat, *DropKeep or *Decolorize.
type Stage interface{ stage() }

// LineFilterOp is a line filter's operator.
type LineFilterOp string

// The line filter operators.
const (
	LineContains    LineFilterOp = "|="
	LineNotContains LineFilterOp = "!="
	LineMatch       LineFilterOp = "|~"
	LineNotMatch    LineFilterOp = "!~"
	LinePattern     LineFilterOp = "|>"
	LineNotPattern  LineFilterOp = "!>"
)

// Negated says whether op keeps the lines its values do not match: its
// "or" keeps a line none of them matches, as Loki's (pkg/logql/syntax
// ast.go, newOrLineFilterExpr).
func (op LineFilterOp) Negated() bool {
	return op == LineNotContains || op == LineNotMatch || op == LineNotPattern
}

// LineFilter keeps the lines that hold (|=, |~) or do not hold (!=, !~)
// one of Values: `|= "a" or "b"` keeps lines holding either, `!= "a" or
// "b"` those holding neither. Regular expressions are unanchored.
type LineFilter struct {
	Op     LineFilterOp
	Values []string
	res    []*regexp.Regexp
	pats   [][]patternPart
}

// ParserKind names a parser stage.
type ParserKind string

// The parsers.
const (
	ParseJSON    ParserKind = "json"
	ParseLogfmt  ParserKind = "logfmt"
	ParseRegexp  ParserKind = "regexp"
	ParsePattern ParserKind = "pattern"
	ParseUnpack  ParserKind = "unpack"
)

// Parser extracts labels from the line.
type Parser struct {
	Kind ParserKind
	// Params are json's and logfmt's label=expression extractions; none
	// extracts every field.
	Params []ExtractParam
	// Arg is regexp's expression or pattern's pattern.
	Arg       string
	Strict    bool // logfmt --strict: stop at the first malformed pair
	KeepEmpty bool // logfmt --keep-empty: keep pairs without a value
	re        *regexp.Regexp
	pattern   []patternPart
}

// ExtractParam is one extraction of json or logfmt: Label from Expr (a
// JSON path like servers[0].host, a logfmt key; Label itself when Expr
// is empty).
type ExtractParam struct {
	Label string
	Expr  string
}

// LabelFilterStage filters lines by their labels.
type LabelFilterStage struct{ Filter LabelFilter }

// LabelFilter is a label filter: *StringFilter, *NumberFilter,
// *DurationFilter, *BytesFilter or *BinaryFilter.
type LabelFilter interface{ labelFilter() }

// StringFilter compares a label with a string (= != =~ !~).
type StringFilter struct{ Matcher *Matcher }

// CmpOp is a comparison: == != > >= < <=.
type CmpOp string

// NumberFilter compares a label read as a number.
type NumberFilter struct {
	Name  string
	Op    CmpOp
	Value float64
}

// DurationFilter compares a label read as a Go duration.
type DurationFilter struct {
	Name  string
	Op    CmpOp
	Value time.Duration
}

// BytesFilter compares a label read as a byte size.
type BytesFilter struct {
	Name  string
	Op    CmpOp
	Value uint64
}

// BinaryFilter joins two filters with and (also written "," or a space)
// or or.
type BinaryFilter struct {
	And         bool
	Left, Right LabelFilter
}

// LineFormat replaces the line with a Go template over the labels.
type LineFormat struct {
	Template string
	tmpl     *lineTemplate
}

// LabelFormat renames labels (dst=src) or sets them from templates
// (dst="{{...}}").
type LabelFormat struct{ Items []LabelFormatItem }

// LabelFormatItem is one rename or template.
type LabelFormatItem struct {
	Dst      string
	Src      string // the label renamed, when Template is empty
	Template string
	tmpl     *lineTemplate
}

// DropKeep drops (Keep false) or keeps only (Keep true) labels: by name,
// or by name and value when the item has a matcher.
type DropKeep struct {
	Keep  bool
	Items []DropItem
}

// DropItem is a label name, or a matcher on one.
type DropItem struct {
	Name    string
	Matcher *Matcher
}

// Decolorize strips ANSI colour codes from the line.
type Decolorize struct{}

// Unwrap takes a sample's value from a label: as a number, or through
// duration() (seconds) or bytes().
type Unwrap struct {
	Label string
	Conv  string // "", "duration", "duration_seconds" or "bytes"
	// PostFilters are label filters after unwrap (| __error__="").
	PostFilters []LabelFilter
}

// RangeAggr is a range aggregation: op(log-expr [range] offset).
type RangeAggr struct {
	Op       string
	Log      *LogExpr
	Unwrap   *Unwrap
	Range    time.Duration
	Offset   time.Duration
	Param    float64   // quantile_over_time's φ
	Grouping *Grouping // by/without of the unwrapped aggregations
}

// Grouping is by (...) or without (...).
type Grouping struct {
	Without bool
	Labels  []string
}

// VectorAggr is a vector aggregation: sum, avg, min, max, count, topk,
// bottomk, stddev, stdvar, sort, sort_desc.
type VectorAggr struct {
	Op       string
	Grouping *Grouping
	Param    float64 // topk's and bottomk's k
	Inner    Expr
}

// BinaryExpr is an arithmetic, comparison or set operation.
type BinaryExpr struct {
	Op         string
	LHS, RHS   Expr
	ReturnBool bool
	Matching   *VectorMatching
}

// VectorMatching is on/ignoring and group_left/group_right.
type VectorMatching struct {
	On      bool
	Labels  []string
	Card    string // "", "group_left" or "group_right"
	Include []string
}

// Literal is a number.
type Literal struct{ Val float64 }

// VectorLit is vector(n): one sample without labels at each step.
type VectorLit struct{ Val float64 }

// LabelReplace is label_replace(v, dst, replacement, src, regex).
type LabelReplace struct {
	Inner                 Expr
	Dst, Replacement, Src string
	Regex                 string
	re                    *regexp.Regexp
}

func (*LogExpr) expr()      {}
func (*RangeAggr) expr()    {}
func (*VectorAggr) expr()   {}
func (*BinaryExpr) expr()   {}
func (*Literal) expr()      {}
func (*VectorLit) expr()    {}
func (*LabelReplace) expr() {}

func (*LineFilter) stage()       {}
func (*Parser) stage()           {}
func (*LabelFilterStage) stage() {}
func (*LineFormat) stage()       {}
func (*LabelFormat) stage()      {}
func (*DropKeep) stage()         {}
func (*Decolorize) stage()       {}

func (*StringFilter) labelFilter()   {}
func (*NumberFilter) labelFilter()   {}
func (*DurationFilter) labelFilter() {}
func (*BytesFilter) labelFilter()    {}
func (*BinaryFilter) labelFilter()   {}
