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
	if b.has(name, CatParsed) {
		// The first value parsed on a line keeps its name: Loki's parsers
		// skip a key already extracted (pkg/logql/log/parser.go,
		// parserHints.Extracted, recorded by every parsed label's Set).
		return
	}
	b.set(CatParsed, name, value)
}

// jsonAll extracts every scalar field of a JSON object line, nested keys
// joined with _ (Loki pkg/logql/log/parser.go JSONParser): arrays and
// nulls are skipped; a line that is not a JSON object is a
// JSONParserErr. Fields are read in the line's order, so of two keys
// that sanitize to one label name the first wins, as in Loki.
func jsonAll(line string, b *builder) {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil {
		b.setErr(errJSON, err.Error())
		return
	} else if tok != json.Delim('{') {
		b.setErr(errJSON, "not a JSON object")
		return
	}
	if err := jsonObject(dec, "", b); err != nil {
		b.setErr(errJSON, err.Error())
	}
}

// jsonObject sets the fields of the object whose '{' dec has just read,
// and reads its '}'.
func jsonObject(dec *json.Decoder, prefix string, b *builder) error {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := tok.(string)
		key := sanitizeLabelName(k, prefix == "")
		if key != "" && prefix != "" {
			key = prefix + "_" + key
		}
		if tok, err = dec.Token(); err != nil {
			return err
		}
		switch x := tok.(type) {
		case json.Delim:
			if x == '{' && key != "" {
				err = jsonObject(dec, key, b)
			} else {
				err = jsonSkip(dec)
			}
			if err != nil {
				return err
			}
			continue
		case string:
			if key != "" {
				setParsed(b, key, x)
			}
		case json.Number:
			if key != "" {
				setParsed(b, key, x.String())
			}
		case bool:
			if key != "" {
				setParsed(b, key, strconv.FormatBool(x))
			}
		}
	}
	_, err := dec.Token() // the closing '}'
	return err
}

// jsonSkip reads the rest of the object or array whose opening dec has
// just read.
func jsonSkip(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// jsonParams extracts the labels of json's parameters by their paths;
// a path not found gives an empty label (Loki JSONExpressionParser). The
// line's top-level object is decoded once for all of them.
func jsonParams(params []ExtractParam, line string, b *builder) {
	// As Loki's JSONExpressionParser.Process (pkg/logql/log/parser.go):
	// an empty line gives no label and no error, and a line that does
	// not start as JSON does (isValidJSONStart: '"', '{' or '[', no
	// leading space) is an error without the decoder's leniency.
	if line == "" {
		return
	}
	if c := line[0]; c != '"' && c != '{' && c != '[' {
		b.setErr(errJSON, "")
		return
	}
	dec := json.NewDecoder(strings.NewReader(line))
	var doc json.RawMessage
	if err := dec.Decode(&doc); err != nil {
		b.setErr(errJSON, err.Error())
		return
	}
	var top map[string]json.RawMessage // nil: not an object
	_ = json.Unmarshal(doc, &top)
	for _, p := range params {
		path := p.Expr
		if path == "" {
			path = p.Label
		}
		name := p.Label
		if b.has(name, CatStream) || b.has(name, CatMetadata) {
			name += duplicateSuffix
		}
		b.set(CatParsed, name, jsonText(jsonPath(doc, top, path)))
	}
}

// jsonPath follows a path such as a.b[0]["c d"] in doc, undecoded
// below the path so that an object or array found keeps its text as the
// line has it; nil when absent. top is doc's object, decoded (nil when
// doc is none).
func jsonPath(doc json.RawMessage, top map[string]json.RawMessage, path string) json.RawMessage {
	cur := doc
	for path != "" && cur != nil {
		var key string
		switch {
		case path[0] == '.':
			path = path[1:]
			continue
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return nil
			}
			key = strings.TrimSpace(path[1:end])
			path = path[end+1:]
			if uq, err := strconv.Unquote(key); err == nil {
				key = uq
				break
			}
			i, err := strconv.Atoi(key)
			var arr []json.RawMessage
			if err != nil || json.Unmarshal(cur, &arr) != nil || i < 0 || i >= len(arr) {
				return nil
			}
			cur, top = arr[i], nil
			continue
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			key, path = path[:end], path[end:]
		}
		o := top
		if o == nil && json.Unmarshal(cur, &o) != nil {
			return nil
		}
		cur, top = o[key], nil
	}
	return cur
}

// jsonText is a JSON value as a label: a string unquoted, null empty,
// anything else its text in the line (Loki JSONExpressionParser sets an
// object's bytes as they are, not a re-encoding).
func jsonText(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return string(v)
}

// unpack reads a line packed by Promtail's pack stage: a JSON object
// whose string fields are labels and whose _entry is the original line
// (Loki pkg/logql/log/parser.go UnpackParser). The line is replaced
// through b's "line" return, so process's caller reads it back.
func unpack(line string, b *builder) {
	// As Loki's UnpackParser.Process (pkg/logql/log/parser.go): an empty
	// line is left alone, one not starting with '{' is not an object.
	if line == "" {
		return
	}
	if line[0] != '{' {
		b.setErr(errJSON, "expecting json object, but it is not")
		return
	}
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
