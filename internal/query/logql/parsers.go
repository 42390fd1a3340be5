package logql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// duplicateSuffix marks a parsed label whose name a stream or
// structured-metadata label already has (Loki pkg/logql/log/parser.go).
const duplicateSuffix = "_extracted"

func (ps *Parser) process(line string, b *builder) {
	switch ps.Kind {
	case ParseJSON:
		if len(ps.Params) > 0 {
			jsonParams(ps.Params, line, b)
		} else {
			jsonAll(line, b)
		}
	case ParseLogfmt:
		logfmt(ps, line, b)
	case ParseRegexp:
		m := ps.re.FindStringSubmatch(line)
		if m == nil {
			return
		}
		for i, name := range ps.re.SubexpNames() {
			if name != "" {
				setParsed(b, name, m[i])
			}
		}
	case ParsePattern:
		names, values := matchPattern(ps.pattern, line)
		for i, name := range names {
			setParsed(b, name, values[i])
		}
	case ParseUnpack:
		unpack(line, b)
	}
}

// setParsed sets a parsed label, renamed with _extracted when a stream
// or structured-metadata label has its name.
func setParsed(b *builder, name, value string) {
	if b.has(name, CatStream) || b.has(name, CatMetadata) {
		name += duplicateSuffix
	}
	b.set(CatParsed, name, value)
}

// jsonAll extracts every scalar field of a JSON object line, nested keys
// joined with _ (Loki pkg/logql/log/parser.go JSONParser): arrays and
// nulls are skipped; a line that is not a JSON object is a
// JSONParserErr.
func jsonAll(line string, b *builder) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		b.setErr(errJSON, err.Error())
		return
	}
	if obj == nil {
		b.setErr(errJSON, "not a JSON object")
		return
	}
	var walk func(prefix string, o map[string]any)
	walk = func(prefix string, o map[string]any) {
		for k, v := range o {
			key := sanitizeLabelName(k, prefix == "")
			if key == "" {
				continue
			}
			if prefix != "" {
				key = prefix + "_" + key
			}
			switch x := v.(type) {
			case map[string]any:
				walk(key, x)
			case string:
				setParsed(b, key, x)
			case json.Number:
				setParsed(b, key, x.String())
			case bool:
				setParsed(b, key, strconv.FormatBool(x))
			}
		}
	}
	walk("", obj)
}

// jsonParams extracts the labels of json's parameters by their paths;
// a path not found gives an empty label (Loki JSONExpressionParser).
func jsonParams(params []ExtractParam, line string, b *builder) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		b.setErr(errJSON, err.Error())
		return
	}
	for _, p := range params {
		path := p.Expr
		if path == "" {
			path = p.Label
		}
		v := jsonPath(doc, path)
		name := p.Label
		if b.has(name, CatStream) || b.has(name, CatMetadata) {
			name += duplicateSuffix
		}
		b.set(CatParsed, name, jsonText(v))
	}
}

// jsonPath follows a path such as a.b[0]["c d"] in doc; nil when absent.
func jsonPath(doc any, path string) any {
	cur := doc
	for path != "" && cur != nil {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil
			}
			key := strings.TrimSpace(path[1:end])
			path = path[end+1:]
			if uq, err := strconv.Unquote(key); err == nil {
				o, _ := cur.(map[string]any)
				cur = o[uq]
				continue
			}
			i, err := strconv.Atoi(key)
			arr, _ := cur.([]any)
			if err != nil || i < 0 || i >= len(arr) {
				return nil
			}
			cur = arr[i]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			o, _ := cur.(map[string]any)
			cur = o[path[:end]]
			path = path[end:]
		}
	}
	return cur
}

// jsonText is a JSON value as a label: strings unquoted, others as JSON.
func jsonText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(buf.String(), "\n")
}

// unpack reads a line packed by Promtail's pack stage: a JSON object
// whose string fields are labels and whose _entry is the original line
// (Loki pkg/logql/log/parser.go UnpackParser). The line is replaced
// through b's "line" return, so process's caller reads it back.
func unpack(line string, b *builder) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		b.setErr(errJSON, err.Error())
		return
	}
	for k, v := range obj {
		if s, ok := v.(string); ok && k != "_entry" {
			setParsed(b, sanitizeLabelName(k, true), s)
		}
	}
}

// unpackedLine is the _entry of a packed line, or the line.
func unpackedLine(line string) string {
	var obj struct {
		Entry *string `json:"_entry"`
	}
	if json.Unmarshal([]byte(line), &obj) == nil && obj.Entry != nil {
		return *obj.Entry
	}
	return line
}

// logfmt extracts key=value pairs (Loki pkg/logql/log/parser.go
// LogfmtParser over pkg/logql/log/logfmt): values may be quoted with Go
// escapes; a key without a value is kept only with --keep-empty. A
// malformed pair stops parsing with --strict, a LogfmtParserErr; without
// it, the pair is skipped to the next space and no error is set, as
// Loki's parser only reports errors when strict (so a JSON line among
// logfmt ones fails no metric query). With parameters, only the labels
// asked for are set, each from its key.
func logfmt(ps *Parser, line string, b *builder) {
	want := map[string]string{} // key → label, for parameters
	for _, p := range ps.Params {
		key := p.Expr
		if key == "" {
			key = p.Label
		}
		want[key] = p.Label
	}
	// malformed handles a pair unreadable at i: it answers whether to
	// go on, from the next space.
	i := 0
	malformed := func(msg string) bool {
		if ps.Strict {
			b.setErr(errLogfmt, fmt.Sprintf("logfmt syntax error at pos %d : %s", i+1, msg))
			return false
		}
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			i++
		}
		return true
	}
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= len(line) {
			break
		}
		start := i
		for i < len(line) && line[i] != '=' && line[i] != ' ' && line[i] != '\t' && line[i] != '"' {
			i++
		}
		key := line[start:i]
		if key == "" || i < len(line) && line[i] == '"' {
			if !malformed(fmt.Sprintf("unexpected '%c'", line[i])) {
				return
			}
			continue
		}
		var value string
		hasValue := i < len(line) && line[i] == '='
		if hasValue {
			i++
			if i < len(line) && line[i] == '"' {
				j := i + 1
				for j < len(line) && line[j] != '"' {
					if line[j] == '\\' {
						j++
					}
					j++
				}
				if j >= len(line) {
					if ps.Strict {
						b.setErr(errLogfmt, fmt.Sprintf("logfmt syntax error at pos %d : unterminated quoted value", len(line)+1))
					}
					return
				}
				v, err := strconv.Unquote(line[i : j+1])
				if err != nil {
					v = line[i+1 : j]
				}
				value = v
				i = j + 1
			} else {
				vs := i
				for i < len(line) && line[i] != ' ' && line[i] != '\t' && line[i] != '=' && line[i] != '"' {
					i++
				}
				if i < len(line) && (line[i] == '=' || line[i] == '"') {
					if !malformed(fmt.Sprintf("unexpected '%c'", line[i])) {
						return
					}
					continue
				}
				value = line[vs:i]
			}
		}
		if value == "" && !ps.KeepEmpty {
			continue
		}
		if len(want) > 0 {
			if label, ok := want[key]; ok {
				setParsed(b, label, value)
			}
			continue
		}
		if name := sanitizeLabelName(key, true); name != "" {
			setParsed(b, name, value)
		}
	}
	for _, label := range want {
		if _, ok := b.get(label); !ok {
			b.set(CatParsed, label, "")
		}
	}
}

// compileRegexpParser compiles regexp's expression, which must name at
// least one group (Loki NewRegexpParser).
func compileRegexpParser(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, &ParseError{Msg: fmt.Sprintf("invalid regexp parser expression %q: %v", expr, err)}
	}
	seen := map[string]bool{}
	for _, n := range re.SubexpNames() {
		if n == "" {
			continue
		}
		if seen[n] {
			return nil, &ParseError{Msg: fmt.Sprintf("duplicate extracted label name '%s'", n)}
		}
		seen[n] = true
	}
	if len(seen) == 0 {
		return nil, &ParseError{Msg: "at least one named capture must be supplied"}
	}
	return re, nil
}
