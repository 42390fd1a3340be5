package genai

import (
	"fmt"
	"slices"
	"strings"
)

// MappingTables writes the mapping of each convention as Markdown tables
// (the README's "Where each column comes from"): generated from the
// tables the mapping reads, so the two cannot disagree.
func MappingTables() string {
	var b strings.Builder
	for _, c := range Conventions {
		fmt.Fprintf(&b, "**%s**, from %s:\n\n| column | attribute |\n|---|---|\n", c.Name, c.Source)
		if op := operationDoc(c.from); op != "" {
			fmt.Fprintf(&b, "| operation | %s |\n", op)
		}
		for _, col := range Columns {
			i := slices.Index(ColumnNames[:], col.Name)
			var attrs []string
			if i >= 0 {
				for _, s := range mapping[i] {
					if s.from&c.from == 0 {
						continue
					}
					a := "`" + s.attr + "`"
					switch {
					case s.key != "":
						a += " key `" + s.key + "`"
					case s.kind != "":
						a += " when `traceloop.span.kind` is `" + s.kind + "`"
					case s.with != "":
						a += " with `" + s.with + "`"
					case s.holdsCache:
						a += " where the provider's input holds its cache"
					}
					attrs = append(attrs, a)
				}
			}
			switch col.Name {
			case "finish_reasons":
				attrs = listDoc(finishReasonSources, c.from, "finish_reason")
			case "input_messages":
				attrs = listDoc(inputMessages, c.from, "role, content")
			case "output_messages":
				attrs = listDoc(outputMessages, c.from, "role, content")
			case "provider":
				if c.from == fromClaudeCode {
					attrs = []string{"always `anthropic`"}
				}
			case "input_tokens":
				if c.from == fromClaudeCode {
					// It counts the input without the cache (see Map).
					attrs = []string{"`input_tokens` + `cache_read_tokens` + `cache_creation_tokens`"}
				}
			}
			if len(attrs) > 0 {
				fmt.Fprintf(&b, "| %s | %s |\n", col.Name, strings.Join(attrs, ", then "))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func listDoc(sources []listSource, from origin, fields string) []string {
	var out []string
	for _, s := range sources {
		if s.from&from == 0 {
			continue
		}
		if s.flat {
			out = append(out, "`"+s.attr+"N.`("+fields+")")
		} else {
			out = append(out, "`"+s.attr+"`")
		}
	}
	return out
}

// operationDoc says how a convention names the operation.
func operationDoc(from origin) string {
	mapped := func(what string, names map[string]string) string {
		var pairs []string
		for k, v := range names {
			pairs = append(pairs, k+" → "+v)
		}
		slices.Sort(pairs)
		return what + ": " + strings.Join(pairs, ", ")
	}
	switch from {
	case fromOTel:
		return "`gen_ai.operation.name`, lowercased"
	case fromOpenInference:
		return mapped("`openinference.span.kind`", openInferenceKinds)
	case fromTraceloop:
		return mapped("`llm.request.type`", traceloopRequestTypes) + "; then " + mapped("`traceloop.span.kind`", traceloopSpanKinds)
	case fromVercel:
		return mapped("`ai.operationId`", vercelOperations)
	case fromClaudeCode:
		return mapped("the span's name", claudeCodeSpans) + "; another `claude_code.X`: X"
	}
	return ""
}
