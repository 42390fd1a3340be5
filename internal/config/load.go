package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment override: kafka.brokers is
// TRACELAKE_KAFKA_BROKERS, batch.max_bytes is TRACELAKE_BATCH_MAX_BYTES.
const EnvPrefix = "TRACELAKE_"

// FromFile reads the file at path over Default (YAML, or the reference tool's JSON
// file when the content is a JSON object with its keys), then applies
// TRACELAKE_* environment overrides, then overrides (a command's flags).
// The defaults that follow from other keys (otlp.mode from the Kafka keys)
// are filled in last, from all three. An empty path loads defaults and
// the environment only. Every problem found is returned, joined, one per
// key, with the config as far as it could be read, so the caller can add
// Validate's findings to the report. A file that cannot be read or parsed
// is that one error, with no config: the defaults validated would add
// problems the file may not have.
func FromFile(path string, overrides ...func(*Config)) (*Config, error) {
	cfg := Default()
	cfg.Kafka.Group = groupLeftOut
	var fileErr error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		fileErr = decodeFile(cfg, path, data)
		if errors.As(fileErr, new(unparsable)) {
			// Nothing of the file was read: the defaults validated
			// would add problems (kafka.topics missing) it may not have.
			return nil, fileErr
		}
	}
	envErr := errors.Join(applyEnv(cfg, os.LookupEnv), unknownEnv(os.Environ()))
	for _, o := range overrides {
		o(cfg)
	}
	cfg.settle()
	err := errors.Join(fileErr, envErr)
	cfg.unread = meantKeys(err)
	return cfg, err
}

// unparsable is a config file's error that leaves nothing of it read (a
// syntax error, a second document).
type unparsable struct{ err error }

func (e unparsable) Error() string { return e.err.Error() }
func (e unparsable) Unwrap() error { return e.err }

// FromYAML reads YAML text over Default, without the environment (for
// configurations shipped inside the binary).
func FromYAML(data []byte) (*Config, error) {
	cfg := Default()
	cfg.Kafka.Group = groupLeftOut
	err := decodeFile(cfg, "(embedded).yaml", data)
	cfg.settle()
	cfg.unread = meantKeys(err)
	return cfg, err
}

// groupLeftOut stands in kafka.group while the file, the environment and
// the flags are read, so that settle tells a group left out (which takes
// its signal's default) from one given, even the default's name: a logs
// loader given group tracelake (its Kafka ACLs grant that group alone,
// or it stays where it ran before) keeps it. No name Kafka takes.
const groupLeftOut = "\x00"

func decodeFile(cfg *Config, path string, data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if err := jsonSyntax(trimmed); err != nil {
			// Read as YAML instead, a trailing comma passes and the
			// reference tool's keys were refused one by one as unknown.
			return unparsable{fmt.Errorf("parse %s: %w", path, err)}
		}
		if looksLikeReference(trimmed) {
			return decodeReference(cfg, trimmed)
		}
	}
	// A decoder, not yaml.Unmarshal: Unmarshal reads the first document
	// and drops the rest, so settings after a "---" would be ignored
	// without a word.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file means all defaults
		}
		return unparsable{fmt.Errorf("parse %s: %w", path, err)}
	}
	var second yaml.Node
	if err := dec.Decode(&second); err == nil && len(second.Content) > 0 && !emptyDocument(&second) {
		return unparsable{fmt.Errorf("%s: a second YAML document at line %d: a config file holds one document (remove the \"---\" and merge the keys into one mapping)", path, second.Content[0].Line)}
	} else if err != nil && !errors.Is(err, io.EOF) {
		return unparsable{fmt.Errorf("parse %s: %w", path, err)}
	}
	if len(root.Content) == 0 {
		return nil // an empty file means all defaults
	}
	var errs []error
	decodeNode(root.Content[0], reflect.ValueOf(cfg).Elem(), "", &errs)
	return errors.Join(errs...)
}

// jsonSyntax says where a JSON text (not empty: an empty file means all
// defaults) is not valid, by line.
func jsonSyntax(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var syntax *json.SyntaxError
	switch {
	case len(data) == 0 || err == nil:
		return nil
	case errors.As(err, &syntax):
		line := 1 + bytes.Count(data[:min(int(syntax.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("not valid JSON at line %d: %v", line, syntax)
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
)

// emptyDocument says whether doc holds nothing: yaml.v3 reads a document
// with no content (a trailing "---") as one null scalar.
func emptyDocument(doc *yaml.Node) bool {
	c := doc.Content
	return len(c) == 1 && c[0].Kind == yaml.ScalarNode && c[0].Tag == "!!null" && c[0].Value == ""
}

// decodeNode decodes n into v key by key, so that every error carries the key
// path and unknown keys are reported with the keys accepted in their place.
func decodeNode(n *yaml.Node, v reflect.Value, path string, errs *[]error) {
	// An alias (*name) stands for the node its anchor marks: a section
	// may be given as an alias of a mapping like any other YAML value.
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if v.Kind() == reflect.Struct && !reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		fields := yamlFields(v.Type())
		if n.Kind != yaml.MappingNode {
			// The value is not repeated: a single value where a section
			// goes is likely the secret it holds (sink.databend given
			// the DSN). The section's keys are left unread, not also
			// reported missing.
			var keys []string
			walkLeaves(v, fromEnv.ReplaceAllString(path, ""), func(p string, _ reflect.StructField, _ reflect.Value) { keys = append(keys, p) })
			*errs = append(*errs, typoError{meant: keys, err: fmt.Errorf("%s: want a mapping of keys (%s), got %s", orRoot(path), acceptedKeys(fields), givenKind(n))})
			return
		}
		seen := map[string]int{}   // key -> line, to report a key given twice
		var unknown []int          // the indexes in *errs of unknown keys
		unknownAt := map[int]int{} // such an index -> the key's node
		defer func() {
			if len(unknown) == 0 || !strings.HasSuffix(path, "]") {
				return
			}
			// A list item (a model, a heartbeat) starts from nothing: the
			// key an unknown one meant (one a letter or two away) is
			// absent, and Validate would report it missing too, and the
			// item as lacking it. Name them, for Validate to leave.
			item := fromEnv.ReplaceAllString(path, "")
			for _, j := range unknown {
				typo := n.Content[unknownAt[j]].Value
				var meant []string
				for k := range fields {
					if _, given := seen[k]; !given && editDistance(typo, k) <= 2 {
						meant = append(meant, join(item, k))
					}
				}
				if len(meant) > 0 {
					meant = append(meant, item)
				}
				(*errs)[j] = typoError{meant: meant, err: (*errs)[j]}
			}
		}()
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if n.Content[i].Tag == "!!merge" {
				// Merged keys would have to be checked and reported like
				// written ones; rather than half-support "<<", refuse it.
				*errs = append(*errs, fmt.Errorf("%s: the YAML merge key << is not supported: write the keys out, or give the whole section as an alias (key: *name)", join(path, key)))
				continue
			}
			if line, dup := seen[key]; dup {
				// YAML forbids it; keeping the last value silently would
				// hide which setting is in force.
				*errs = append(*errs, fmt.Errorf("%s: defined twice (lines %d, %d): give each key once", join(path, key), line, n.Content[i].Line))
				continue
			}
			seen[key] = n.Content[i].Line
			idx, ok := fields[key]
			if !ok {
				unknown = append(unknown, len(*errs))
				unknownAt[len(*errs)] = i
				*errs = append(*errs, fmt.Errorf("%s: unknown key (accepted: %s)", join(path, key), acceptedKeys(fields)))
				continue
			}
			decodeNode(n.Content[i+1], v.Field(idx), join(path, key), errs)
		}
		return
	}
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct && !reflect.PointerTo(v.Type()).Implements(yamlUnmarshaler) {
		// A list of sections (merge.models): each item key by key.
		if n.Kind != yaml.SequenceNode {
			*errs = append(*errs, fmt.Errorf("%s: want a list", orRoot(path)))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content)))
		for i, item := range n.Content {
			decodeNode(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i), errs)
		}
		return
	}
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		// Allow "a,b" for lists, as in the environment.
		v.Set(splitList(n.Value, v.Type()))
		return
	}
	if err := decodeLeaf(n, v); err != nil {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, err))
	}
}

// noValue is the error of a key given null, which would leave it as it
// was without a word.
const noValue = `no value (null): give one ("" for an empty string), or leave the key out for its default`

// decodeLeaf decodes one key's value into v, refusing what yaml.v3 would
// take without a word and without effect: a null (`listen:` with nothing
// after it, or ~) leaves a string, number, duration or boolean as it was,
// the default (so `metrics: {listen: }` kept the endpoint on), and a
// fraction is truncated into an integer (workers: 2.5 ran 2 workers). A
// list or a map given null is emptied, which is what null says.
func decodeLeaf(n *yaml.Node, v reflect.Value) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		switch v.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		default:
			return errors.New(noValue)
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && v.CanInt() && !reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		var f float64
		if err := n.Decode(&f); err == nil && f != math.Trunc(f) {
			return fmt.Errorf("want a whole number, got %s", n.Value)
		}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		var kind *yaml.TypeError
		if errors.As(err, &kind) && !reflect.PointerTo(v.Type()).Implements(yamlUnmarshaler) {
			// yaml.v3 names the Go type ("cannot unmarshal !!seq into
			// bool"); say what to write instead. A type that reads
			// itself (merge columns) words its own errors.
			return fmt.Errorf("want %s, got %s", wanted(v.Type()), given(n))
		}
		return errors.New(cleanYAMLError(err))
	}
	return nil
}

// wanted says in words what a key of type t accepts.
func wanted(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Duration]():
		return durationWanted
	case t == reflect.TypeFor[ByteSize]():
		return sizeWanted
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return `a list such as [a, b] or "a,b"`
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping of keys"
	}
	return t.String()
}

// given says what value n is, quoting a scalar.
func given(n *yaml.Node) string {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return givenKind(n)
}

// givenKind says what kind of value n is without repeating it.
func givenKind(n *yaml.Node) string {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!null":
		return "no value"
	case "!!bool":
		return "a boolean"
	case "!!int", "!!float":
		return "a number"
	}
	return "a string"
}

// typoError is an unknown key of a list item (merge.models[0].kye):
// meant are the item's keys not given that it is a letter or two from,
// and the item itself. Validate says nothing of those (Config.unread):
// the typo was reported twice, as unknown and as its key missing.
type typoError struct {
	meant []string
	err   error
}

func (e typoError) Error() string { return e.err.Error() }
func (e typoError) Unwrap() error { return e.err }

// fromEnv is what an environment variable's key path carries beyond the
// key's: "merge.models (from TRACELAKE_MERGE_MODELS)[0]".
var fromEnv = regexp.MustCompile(` \(from [A-Z0-9_]+\)`)

// meantKeys are the keys the typos in list items that err (joined)
// reports likely meant.
func meantKeys(err error) []string {
	if te, ok := err.(typoError); ok {
		return te.meant
	}
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, meantKeys(e)...)
		}
	}
	return out
}

// Nearest is the one of names that word is likely a misspelling of (a
// letter or two away, and nearer than any other), for a "did you mean"; ok
// is false when none is.
func Nearest(word string, names []string) (nearest string, ok bool) {
	best, tie := 3, false
	for _, n := range names {
		switch d := editDistance(word, n); {
		case d < best:
			nearest, best, tie = n, d, false
		case d == best && n != nearest:
			tie = true
		}
	}
	return nearest, nearest != "" && !tie
}

// editDistance is the Levenshtein distance of a and b (kye to key: 2).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			m[tag] = i
		}
	}
	return m
}

func acceptedKeys(fields map[string]int) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// cleanYAMLError drops yaml's "yaml: unmarshal errors:\n  line N:" wrapping
// and keeps the reason.
func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n")
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ": "); strings.HasPrefix(s, "line ") && i > 0 {
		s = s[i+2:]
	}
	return s
}

func splitList(s string, t reflect.Type) reflect.Value {
	out := reflect.MakeSlice(t, 0, 4)
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = reflect.Append(out, reflect.ValueOf(part))
		}
	}
	return out
}

// applyEnv sets every leaf key whose TRACELAKE_* variable is present.
func applyEnv(cfg *Config, lookup func(string) (string, bool)) error {
	var errs []error
	walkLeaves(reflect.ValueOf(cfg).Elem(), "", func(path string, _ reflect.StructField, v reflect.Value) {
		name := EnvName(path)
		s, ok := lookup(name)
		if !ok {
			return
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) == 0 {
			n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
		} else {
			n = *n.Content[0]
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String {
			// "a,b" or, as for the lists of sections, YAML flow text
			// "[a, b]": read as a list, not split into "[a" and "b]".
			if n.Kind != yaml.SequenceNode {
				v.Set(splitList(s, v.Type()))
				return
			}
			if err := n.Decode(v.Addr().Interface()); err != nil {
				errs = append(errs, fmt.Errorf("%s (from %s): want a list of names such as a,b or [a, b]: %s", path, name, cleanYAMLError(err)))
			}
			return
		}
		if v.Kind() == reflect.String {
			// Keep the text as given: "0123" or "true" stay strings.
			v.SetString(s)
			return
		}
		if v.Kind() == reflect.Slice {
			// A list of sections, as YAML flow text: [{name: m, …}].
			var errsHere []error
			decodeNode(&n, v, path+" (from "+name+")", &errsHere)
			errs = append(errs, errsHere...)
			return
		}
		if err := decodeLeaf(&n, v); err != nil {
			errs = append(errs, fmt.Errorf("%s (from %s): %s", path, name, err))
		}
	})
	return errors.Join(errs...)
}

// unknownEnv reports the variables of environ that are in a section's
// namespace (TRACELAKE_KAFKA_…, TRACELAKE_SINK_DUCKDB_…) but name none of
// its keys: a misspelled override would otherwise leave the file's value
// in force without a word. Other TRACELAKE_* names (TRACELAKE_CPU_PROFILE,
// a test's or another tool's) are not settings and pass.
func unknownEnv(environ []string) error {
	keys := map[string]bool{} // every key's variable
	// A section's variable prefix -> what it holds: its keys' variables
	// and its sections' prefixes (TRACELAKE_KAFKA_SASL_*).
	sections := map[string][]string{}
	walkLeaves(reflect.ValueOf(Default()).Elem(), "", func(path string, _ reflect.StructField, _ reflect.Value) {
		name := EnvName(path)
		keys[name] = true
		child := name
		for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
			prefix := EnvName(path[:i]) + "_"
			if !slices.Contains(sections[prefix], child) {
				sections[prefix] = append(sections[prefix], child)
			}
			child = prefix + "*"
		}
	})
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || keys[name] {
			continue
		}
		// The innermost section it is in says what it could have meant. A
		// section's own name (TRACELAKE_SINK='{type: iceberg}') is in it
		// too: sections are set key by key, and it was ignored.
		var in string
		for prefix := range sections {
			if strings.HasPrefix(name+"_", prefix) && len(prefix) > len(in) {
				in = prefix
			}
		}
		if in != "" {
			accepted := slices.Sorted(slices.Values(sections[in]))
			errs = append(errs, fmt.Errorf("%s: no setting has this name (accepted: %s)", name, strings.Join(accepted, ", ")))
			continue
		}
		// In no section: a top-level key's variable or one whose
		// section is misspelt (TRACELAKE_SHUTDOWN_TIMOUT) would leave
		// the setting as it was without a word; a name far from every
		// setting's (TRACELAKE_CPU_PROFILE) is no setting.
		if meant, ok := Nearest(name, slices.Collect(maps.Keys(keys))); ok && misspelling(name, meant) {
			errs = append(errs, fmt.Errorf("%s: no setting has this name (did you mean %s?)", name, meant))
		}
	}
	return errors.Join(errs...)
}

// misspelling says whether the variable name, in no section, is the
// setting's variable meant misspelt: a letter in four at most changed
// after TRACELAKE_. A short name is a letter from many words: TRACELAKE_HOME,
// _NODE or _MODEL, which a deployment sets for its own use, are no
// misspellings of TRACELAKE_MODE.
func misspelling(name, meant string) bool {
	return 4*editDistance(name, meant) < len(strings.TrimPrefix(meant, EnvPrefix))
}

// EnvName is the environment variable that overrides a key path.
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// walkLeaves calls fn for every non-struct field (or TextUnmarshaler struct)
// with its key path and struct field.
func walkLeaves(v reflect.Value, path string, fn func(string, reflect.StructField, reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		f := v.Field(i)
		p := join(path, tag)
		if f.Kind() == reflect.Struct && !reflect.PointerTo(f.Type()).Implements(textUnmarshaler) {
			walkLeaves(f, p, fn)
			continue
		}
		fn(p, t.Field(i), f)
	}
}
