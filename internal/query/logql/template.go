package logql

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"text/template"
	"time"
	"unicode"
)

// lineTemplate is a line_format or label_format template: Go's
// text/template over the labels, a missing label being empty, with the
// functions of Loki's templates that Grafana users reach for (Loki
// pkg/logql/log/fmt.go functionMap). __line__ and __timestamp__ read the
// entry being formatted: a template belongs to one query's pipeline,
// which one goroutine runs.
type lineTemplate struct {
	t    *template.Template
	line string
	ts   int64
	buf  bytes.Buffer
}

func newTemplate(text string) (*lineTemplate, error) {
	lt := &lineTemplate{}
	funcs := template.FuncMap{
		"__line__":      func() string { return lt.line },
		"__timestamp__": func() time.Time { return time.Unix(0, lt.ts).UTC() },
		"ToLower":       strings.ToLower,
		"ToUpper":       strings.ToUpper,
		"lower":         strings.ToLower,
		"upper":         strings.ToUpper,
		"Replace":       strings.Replace,
		"replace":       func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"Trim":          strings.Trim,
		"TrimLeft":      strings.TrimLeft,
		"TrimRight":     strings.TrimRight,
		"TrimPrefix":    strings.TrimPrefix,
		"TrimSuffix":    strings.TrimSuffix,
		"TrimSpace":     strings.TrimSpace,
		"trim":          strings.TrimSpace,
		"trimAll":       func(cut, s string) string { return strings.Trim(s, cut) },
		"trimPrefix":    func(p, s string) string { return strings.TrimPrefix(s, p) },
		"trimSuffix":    func(p, s string) string { return strings.TrimSuffix(s, p) },
		"title":         titleCase,
		"contains":      func(sub, s string) bool { return strings.Contains(s, sub) },
		"hasPrefix":     func(p, s string) bool { return strings.HasPrefix(s, p) },
		"hasSuffix":     func(p, s string) bool { return strings.HasSuffix(s, p) },
		"repeat":        func(n int, s string) string { return strings.Repeat(s, max(n, 0)) },
		"trunc":         trunc,
		"substr":        substr,
		"default": func(d string, v ...string) string {
			if len(v) == 0 || v[0] == "" {
				return d
			}
			return v[0]
		},
		"regexReplaceAll": func(re, s, repl string) (string, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return "", err
			}
			return r.ReplaceAllString(s, repl), nil
		},
		"regexReplaceAllLiteral": func(re, s, repl string) (string, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return "", err
			}
			return r.ReplaceAllLiteralString(s, repl), nil
		},
		"urlencode": url.QueryEscape,
		"urldecode": url.QueryUnescape,
		"b64enc":    func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"b64dec": func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		},
		"unixEpoch":  func(t time.Time) string { return fmt.Sprint(t.Unix()) },
		"alignLeft":  func(n int, s string) string { return align(n, s, false) },
		"alignRight": func(n int, s string) string { return align(n, s, true) },
	}
	t, err := template.New("line").Option("missingkey=zero").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, &ParseError{Msg: fmt.Sprintf("invalid template %q: %v", text, err)}
	}
	lt.t = t
	return lt, nil
}

// run formats the template for an entry over its labels now; a failing
// template is a TemplateFormatErr and leaves the line as it was.
func (lt *lineTemplate) run(line string, ts int64, b *builder) (string, bool) {
	return lt.runOn(line, ts, templateData(b), b)
}

// templateData is the labels as a template reads them.
func templateData(b *builder) map[string]string {
	data := make(map[string]string, len(b.ls))
	for _, l := range b.ls {
		data[l.Name] = l.Value
	}
	return data
}

// runOn is run over data, labels read earlier.
func (lt *lineTemplate) runOn(line string, ts int64, data map[string]string, b *builder) (string, bool) {
	lt.line, lt.ts = line, ts
	lt.buf.Reset()
	if err := lt.t.Execute(&lt.buf, data); err != nil {
		b.setErr(errTemplateFormat, err.Error())
		return line, false
	}
	return lt.buf.String(), true
}

// titleCase is sprig's title, which is strings.Title (deprecated, so
// not called): a letter after anything but a letter, digit or _ is
// upper-cased, the spacing kept as it is.
func titleCase(s string) string {
	prev := ' '
	return strings.Map(func(r rune) rune {
		sep := isTitleSeparator(prev)
		prev = r
		if sep {
			return unicode.ToTitle(r)
		}
		return r
	}, s)
}

// isTitleSeparator is strings.Title's word boundary.
func isTitleSeparator(r rune) bool {
	if r <= unicode.MaxASCII {
		switch {
		case '0' <= r && r <= '9', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', r == '_':
			return false
		}
		return true
	}
	if unicode.IsLetter(r) || unicode.IsDigit(r) {
		return false
	}
	return unicode.IsSpace(r)
}

// trunc keeps the first n characters, or the last -n; characters, not
// bytes, as Loki's (pkg/logql/log/fmt.go trunc), so no rune is cut.
func trunc(n int, s string) string {
	rs := []rune(s)
	switch {
	case n >= 0 && n < len(rs):
		return string(rs[:n])
	case n < 0 && -n < len(rs):
		return string(rs[len(rs)+n:])
	}
	return s
}

// align is alignLeft (right false) and alignRight: s cut or padded with
// spaces to n characters, counted as runes; a negative n leaves s as it
// is (Loki pkg/logql/log/fmt.go alignLeft, alignRight).
func align(n int, s string, right bool) string {
	rs := []rune(s)
	switch {
	case n < 0 || n == len(rs):
		return s
	case n > len(rs) && right:
		return strings.Repeat(" ", n-len(rs)) + s
	case n > len(rs):
		return s + strings.Repeat(" ", n-len(rs))
	case right:
		return string(rs[len(rs)-n:])
	}
	return string(rs[:n])
}

func substr(start, end int, s string) string {
	if start < 0 {
		start = 0
	}
	if end < 0 || end > len(s) {
		end = len(s)
	}
	if start > end {
		return ""
	}
	return s[start:end]
}
