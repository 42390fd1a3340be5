package logql

import (
	"slices"
	"strings"
	"text/template/parse"
)

// parserHints are what Loki's parser hints (pkg/logql/log/parser_hints.go
// NewParserHint) make of a range aggregation's pipeline, where they
// change answers rather than only speed: skipParsers, a query that reads
// no label at all, whose parsers Loki does not run (NoLabels: the json,
// logfmt, pattern and unpack parsers return the line as it is), so they
// set no error; preserveErr, a query that reads __error__, whose parser
// errors Loki keeps as samples instead of failing the query
// (shouldPreserveError, addErrLabel's __preserve_error__ label).
type parserHints struct {
	skipParsers bool
	preserveErr bool
}

// hintsOf are r's hints; outer is the grouping of a sum directly around
// r, which Loki pushes into the range aggregation's extractor when r has
// none of its own (pkg/logql/syntax/ast.go VectorAggregationExpr.Extractor,
// canInjectVectorGrouping; pkg/logql/syntax/extractor.go), nil for none.
func hintsOf(r *RangeAggr, outer *Grouping) parserHints {
	g := r.Grouping
	if g == nil && outer != nil {
		switch r.Op {
		case "bytes_over_time", "bytes_rate", "sum_over_time", "rate", "count_over_time":
			g = outer
		}
	}
	// A grouping without labels (sum(...), by ()) keeps none;
	// absent_over_time keeps none either.
	noLabels := g != nil && !g.Without && len(g.Labels) == 0 || r.Op == "absent_over_time"
	required := requiredLabels(r)
	if g != nil {
		required = append(required, g.Labels...)
	}
	required = slices.DeleteFunc(required, func(s string) bool { return s == "" })
	preserve := slices.Contains(required, ErrorLabel)
	switch {
	case noLabels && len(required) == 0:
		return parserHints{skipParsers: true}
	case noLabels:
		return parserHints{preserveErr: preserve}
	case g == nil || g.Without || len(g.Labels) == 0:
		// Loki has no hints when it cannot know the labels needed.
		return parserHints{}
	}
	return parserHints{preserveErr: preserve}
}

// requiredLabels are the labels r's stages read (Loki's
// RequiredLabelNames of each stage): label filters' names, the labels
// line_format and label_format templates name, label_format's renamed
// labels, unwrap's label and the names of the filters after it.
func requiredLabels(r *RangeAggr) []string {
	var names []string
	for _, s := range r.Log.Stages {
		switch x := s.(type) {
		case *LabelFilterStage:
			names = filterLabelNames(x.Filter, names)
		case *LineFormat:
			names = append(names, x.tmpl.fields()...)
		case *LabelFormat:
			for _, it := range x.Items {
				if it.tmpl == nil {
					names = append(names, it.Src)
				} else {
					names = append(names, it.tmpl.fields()...)
				}
			}
		}
	}
	if r.Unwrap != nil {
		names = append(names, r.Unwrap.Label)
		for _, f := range r.Unwrap.PostFilters {
			names = filterLabelNames(f, names)
		}
	}
	// A parsed label that collides with a stream label is named with
	// _extracted: Loki hints both names (appendLabelHints).
	for _, n := range names {
		if t, ok := strings.CutSuffix(n, duplicateSuffix); ok {
			names = append(names, t)
		}
	}
	return names
}

// filterLabelNames appends the labels a label filter reads to names.
func filterLabelNames(f LabelFilter, names []string) []string {
	switch x := f.(type) {
	case *StringFilter:
		return append(names, x.Matcher.Name)
	case *NumberFilter:
		return append(names, x.Name)
	case *DurationFilter:
		return append(names, x.Name)
	case *BytesFilter:
		return append(names, x.Name)
	case *BinaryFilter:
		return filterLabelNames(x.Right, filterLabelNames(x.Left, names))
	}
	return names
}

// fields are the labels a template names ({{.name}}), as Loki lists
// them (pkg/logql/log/fmt.go listNodeFields).
func (lt *lineTemplate) fields() []string {
	if lt == nil || lt.t.Tree == nil {
		return nil
	}
	return nodeFields(nil, lt.t.Tree.Root)
}

func nodeFields(dst []string, n parse.Node) []string {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return dst
		}
		for _, c := range x.Nodes {
			dst = nodeFields(dst, c)
		}
	case *parse.ActionNode:
		dst = nodeFields(dst, x.Pipe)
	case *parse.PipeNode:
		if x == nil {
			return dst
		}
		for _, c := range x.Cmds {
			dst = nodeFields(dst, c)
		}
	case *parse.CommandNode:
		for _, a := range x.Args {
			dst = nodeFields(dst, a)
		}
	case *parse.IfNode:
		dst = branchFields(dst, &x.BranchNode)
	case *parse.WithNode:
		dst = branchFields(dst, &x.BranchNode)
	case *parse.RangeNode:
		dst = branchFields(dst, &x.BranchNode)
	case *parse.FieldNode:
		dst = append(dst, x.Ident...)
	}
	return dst
}

func branchFields(dst []string, b *parse.BranchNode) []string {
	dst = nodeFields(dst, b.Pipe)
	dst = nodeFields(dst, b.List)
	return nodeFields(dst, b.ElseList)
}
