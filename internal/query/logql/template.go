package logql

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
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
	funcs := make(template.FuncMap, len(templateFuncs)+2)
	maps.Copy(funcs, templateFuncs)
	funcs["__line__"] = func() string { return lt.line }
	funcs["__timestamp__"] = func() time.Time { return time.Unix(0, lt.ts).UTC() }
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

// templateFuncs are Loki's template functions (pkg/logql/log/fmt.go):
// the sprig functions its templateFunctions names, as sprig has them
// (trunc and substr count bytes: Loki's rune-counting trunc and substring
// in that file are not in its map), and its functionMap.
var templateFuncs = func() template.FuncMap {
	funcs := template.FuncMap{
		"ToLower":    strings.ToLower,
		"ToUpper":    strings.ToUpper,
		"Replace":    strings.Replace,
		"Trim":       strings.Trim,
		"TrimLeft":   strings.TrimLeft,
		"TrimRight":  strings.TrimRight,
		"TrimPrefix": strings.TrimPrefix,
		"TrimSuffix": strings.TrimSuffix,
		"TrimSpace":  strings.TrimSpace,
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
		"count": func(re, s string) (int, error) {
			r, err := regexp.Compile(re)
			if err != nil {
				return 0, err
			}
			return len(r.FindAllStringIndex(s, -1)), nil
		},
		"urldecode":        url.QueryUnescape,
		"urlencode":        url.QueryEscape,
		"bytes":            func(v string) (float64, error) { return convertUnwrapped("bytes", v) },
		"duration":         templateDuration,
		"duration_seconds": templateDuration,
		"unixEpochMillis":  func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) },
		"unixEpochNanos":   func(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) },
		"toDateInZone":     toDateInZone,
		"unixToTime":       unixToTime,
		"alignLeft":        func(n int, s string) string { return align(n, s, false) },
		"alignRight":       func(n int, s string) string { return align(n, s, true) },
		"b64dec":           base64Decode,
	}
	fromSprig := sprig.GenericFuncMap()
	for _, name := range []string{"b64enc", "lower", "upper", "title", "trunc", "substr", "contains", "hasPrefix",
		"hasSuffix", "indent", "nindent", "replace", "repeat", "trim", "trimAll", "trimSuffix", "trimPrefix", "int",
		"float64", "add", "sub", "mul", "div", "mod", "addf", "subf", "mulf", "divf", "max", "min", "maxf", "minf",
		"ceil", "floor", "round", "fromJson", "date", "toDate", "now", "unixEpoch", "default"} {
		funcs[name] = fromSprig[name]
	}
	// The functions that multiply their input make at most
	// maxTemplateExpansion bytes: a query's template must not take the
	// memory of the process it reads from (tracelake run loads beside its
	// reads), as {{ repeat 1000000000 "x" }} on every line would.
	repeat, indent := fromSprig["repeat"].(func(int, string) string), fromSprig["indent"].(func(int, string) string)
	funcs["repeat"] = func(count int, s string) (string, error) {
		if err := expansion(count, len(s)); err != nil {
			return "", fmt.Errorf("repeat: %w", err)
		}
		return repeat(count, s), nil
	}
	bounded := func(spaces int, s string) (string, error) {
		if err := expansion(spaces, strings.Count(s, "\n")+1); err != nil {
			return "", fmt.Errorf("indent: %w", err)
		}
		return indent(spaces, s), nil
	}
	funcs["indent"] = bounded
	funcs["nindent"] = func(spaces int, s string) (string, error) {
		out, err := bounded(spaces, s)
		return "\n" + out, err
	}
	return funcs
}()

// maxTemplateExpansion bounds what repeat and indent add to a line.
const maxTemplateExpansion = 1 << 20

// expansion checks that count copies of n bytes stay within
// maxTemplateExpansion (a negative count is refused, as strings.Repeat
// panics on it).
func expansion(count, n int) error {
	if count < 0 {
		return fmt.Errorf("negative count %d", count)
	}
	if n > 0 && count > maxTemplateExpansion/n {
		return fmt.Errorf("%d copies of %d bytes are past the %d bytes a template function may make", count, n, maxTemplateExpansion)
	}
	return nil
}

// templateDuration is Loki's duration template function: Go's duration
// syntax, in seconds (pkg/logql/log/metrics_extraction.go
// convertDuration).
func templateDuration(v string) (float64, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	return d.Seconds(), nil
}

// unixToTime reads a Unix time whose unit its digits tell: days (5),
// seconds (10), milliseconds (13), microseconds (16) or nanoseconds (19),
// as Loki's (pkg/logql/log/fmt.go unixToTime).
func unixToTime(epoch string) (time.Time, error) {
	n, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("unable to parse time '%v': %w", epoch, err)
	}
	switch len(epoch) {
	case 5:
		return time.Unix(n*86400, 0), nil
	case 10:
		return time.Unix(n, 0), nil
	case 13:
		return time.UnixMilli(n), nil
	case 16:
		return time.UnixMicro(n), nil
	case 19:
		return time.Unix(0, n), nil
	}
	return time.Time{}, fmt.Errorf("unable to parse time '%v': not days, seconds, milliseconds, microseconds or nanoseconds", epoch)
}

// toDateInZone parses str by layout in zone (UTC when zone is unknown);
// what does not parse is the zero time (Loki pkg/logql/log/fmt.go).
func toDateInZone(layout, zone, str string) time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc = time.UTC
	}
	t, _ := time.ParseInLocation(layout, str, loc)
	return t
}

// base64Decode is Loki's b64dec: padding added where it is missing, and
// a value that does not decode gives the error's text, not a failure.
func base64Decode(v string) string {
	if r := len(v) % 4; r != 0 && r != 1 {
		v += strings.Repeat("=", 4-r)
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
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
