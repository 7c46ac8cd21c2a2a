package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// ErrInvalid is wrapped by every error that means "the configuration is
// wrong" (syntax, unknown key, wrong type, failed validation), as opposed
// to "the file could not be read". The CLI maps it to exit code 2.
var ErrInvalid = errors.New("invalid configuration")

// maxFileBytes bounds what Load reads: a config is a few kilobytes, and a
// mistaken --config /dev/zero must not eat the host's memory.
const maxFileBytes = 1 << 20

// maxProblems bounds the problems listed: past that, the file is not a
// config with typos but something else, and a screenful says so.
const maxProblems = 100

// maxNodeVisits bounds the decoding work, so that anchors and merge keys
// that expand exponentially ("billion laughs") fail instead of spinning.
const maxNodeVisits = 100_000

// Load reads the YAML file at path on top of Default and validates the
// result. An empty file yields the defaults.
//
// Errors: a file that cannot be read returns the os error wrapped (so
// errors.Is(err, fs.ErrNotExist) works); any problem with the content
// wraps ErrInvalid and lists every problem found, each on its own line
// with the line number and key, e.g.
//
//	line 3: unknown key "profil" (did you mean "profile"?)
//
// After validation Load drops "host" from Targets (it is always measured)
// and resolves a relative agent.web_config_file or agent.api_token_file
// against the directory of the file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("config %s: %w: the file is larger than %s", path, ErrInvalid, ByteSize(maxFileBytes))
	}
	c, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.normalize(filepath.Dir(path))
	return c, nil
}

// parse decodes data on top of Default and validates it; validation
// problems of keys the file sets carry the line that set them.
func parse(data []byte) (*Config, error) {
	c := Default()
	d := &decoder{lines: map[string]int{}, failed: map[string]bool{}, active: map[*yaml.Node]bool{}, sets: map[string]int{}}
	root, err := parseDocument(data)
	if err != nil {
		return nil, fmt.Errorf("%w:\n%w", ErrInvalid, err)
	}
	if root != nil {
		d.value(root, reflect.ValueOf(c).Elem(), "")
		d.bothSet()
	}
	// Validation runs even after decoding problems, so one pass shows
	// everything; it skips keys whose value could not be decoded, since
	// they hold the default rather than what the file says.
	for _, p := range c.check() {
		if !d.isFailed(p.path) && !slices.ContainsFunc(p.related, d.isFailed) {
			d.problems = append(d.problems, p)
		}
	}
	if len(d.problems) > 0 {
		return nil, joinProblems(d.problems, d.lines)
	}
	c.Deprecated = d.deprecated
	return c, nil
}

// parseDocument returns the single document's root node, or nil for a
// file without content.
func parseDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(err)
	case !isEmpty(&extra):
		return nil, fmt.Errorf("line %d: a config file holds one YAML document, this is a second one", extra.Line)
	}
	if isEmpty(&doc) {
		return nil, nil
	}
	return doc.Content[0], nil
}

// syntaxError drops yaml's "yaml: " prefix so messages start with the
// line, like every other problem.
func syntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if line, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(line, "line ") {
		return fmt.Errorf("%s: YAML syntax error: %s", line, rest)
	}
	return fmt.Errorf("YAML syntax error: %s", msg)
}

// isEmpty reports a document with no content or only a null.
func isEmpty(doc *yaml.Node) bool {
	return doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0])
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// problem is one thing wrong with a configuration. path is the key's
// location (agent.interval, engines[1].name); related lists other keys the
// problem involves, whose line serves when path was not set by the file.
type problem struct {
	line    int
	path    string
	related []string
	msg     string
}

// format returns the problem's message and the line it names (0: none).
func (p problem) format(lines map[string]int) (int, string) {
	line := p.line
	for _, k := range append([]string{p.path}, p.related...) {
		if line != 0 {
			break
		}
		line = lines[k]
	}
	var b strings.Builder
	if line > 0 {
		fmt.Fprintf(&b, "line %d: ", line)
	}
	if p.path != "" {
		b.WriteString(p.path + ": ")
	}
	b.WriteString(p.msg)
	return line, b.String()
}

// joinProblems wraps every problem in ErrInvalid, in file order; problems
// of keys the file does not set come last, in the order found.
func joinProblems(ps []problem, lines map[string]int) error {
	type numbered struct {
		line int
		msg  string
	}
	ns := make([]numbered, len(ps))
	for i, p := range ps {
		line, msg := p.format(lines)
		ns[i] = numbered{line, msg}
	}
	slices.SortStableFunc(ns, func(a, b numbered) int {
		switch {
		case a.line == b.line:
			return 0
		case a.line == 0:
			return 1
		case b.line == 0:
			return -1
		}
		return a.line - b.line
	})
	var errs []error
	for i, n := range ns {
		if i == maxProblems {
			errs = append(errs, fmt.Errorf("... and %d more problems", len(ns)-maxProblems))
			break
		}
		errs = append(errs, errors.New(n.msg))
	}
	return fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(errs...))
}

// decoder walks the YAML node tree alongside the Config value, so that
// every problem can name its key and line, all of them are collected, and
// unknown keys get a suggestion; yaml's own decoder gives neither the key
// nor the path of a wrong value.
type decoder struct {
	problems []problem
	lines    map[string]int           // path -> line of its value in the file
	failed   map[string]bool          // paths whose value could not be decoded
	active   map[*yaml.Node]bool      // mappings being decoded, to stop merge-key cycles
	visits   int                      // nodes visited, bounded by maxNodeVisits
	fields   map[reflect.Type][]field // cache of struct fields by yaml key
	sets     map[string]int           // path -> how often the file set it (a deprecated key and its successor: 2)
	// deprecated lists the deprecated keys set, in the order decoded.
	deprecated []Deprecation
}

// isFailed reports whether path, or a key that contains it, could not be
// decoded.
func (d *decoder) isFailed(path string) bool {
	for path != "" {
		if d.failed[path] {
			return true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return false
}

type field struct {
	key   string
	index int
}

func (d *decoder) addf(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.problems = append(d.problems, problem{line: line, path: path, msg: fmt.Sprintf(format, args...)})
	d.failed[path] = true
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// value decodes n into v, whose location is path. A null value keeps the
// default.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	n, ok := d.resolve(n, path)
	if !ok || isNull(n) {
		return
	}
	if path != "" {
		d.lines[path] = n.Line
		d.sets[path]++
	}
	switch {
	case v.Type() == durationType:
		d.duration(n, v, path)
	case v.Addr().Type().Implements(unmarshalerType):
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.addf(n, path, "%s", err)
		}
	case v.Kind() == reflect.Struct:
		d.mapping(n, v, path)
	case v.Kind() == reflect.Slice:
		d.sequence(n, v, path)
	default:
		d.scalar(n, v, path)
	}
}

// resolve follows aliases and counts the visit against the budget.
func (d *decoder) resolve(n *yaml.Node, path string) (*yaml.Node, bool) {
	d.visits++
	if d.visits > maxNodeVisits {
		if d.visits == maxNodeVisits+1 {
			d.addf(n, "", "the document expands to more than %d values through anchors and aliases", maxNodeVisits)
		}
		return nil, false
	}
	for hops := 0; n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops > 100 {
			d.addf(n, path, "alias %q cannot be resolved", short(n.Value))
			return nil, false
		}
		n = n.Alias
	}
	return n, true
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.addf(n, path, "want a mapping of keys (%s), got %s", strings.Join(d.keys(v.Type()), ", "), describe(n))
		return
	}
	if d.active[n] {
		d.addf(n, path, "a merge key (<<) includes the mapping it is in")
		return
	}
	d.active[n] = true
	defer delete(d.active, n)

	// Merged mappings first, so the mapping's own keys override them, as
	// YAML specifies; of several merged mappings the first one wins.
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			continue
		}
		m, ok := d.resolve(n.Content[i+1], path)
		if !ok {
			continue
		}
		switch m.Kind {
		case yaml.MappingNode:
			d.mapping(m, v, path)
		case yaml.SequenceNode:
			for j := len(m.Content) - 1; j >= 0; j-- {
				if e, ok := d.resolve(m.Content[j], path); ok {
					d.mapping(e, v, path)
				}
			}
		default:
			d.addf(m, path, "a merge key (<<) wants a mapping or a list of mappings, got %s", describe(m))
		}
	}

	fields := d.structFields(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, ok := d.resolve(n.Content[i], path)
		if !ok {
			continue
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.addf(k, path, "a key must be a plain name, got %s", describe(k))
			continue
		}
		name := k.Value
		if first, dup := seen[name]; dup {
			d.addf(k, path, "key %q is set twice (first at line %d)", short(name), first)
			continue
		}
		seen[name] = k.Line
		j := slices.IndexFunc(fields, func(f field) bool { return f.key == name })
		if j < 0 {
			if !d.alias(k, n.Content[i+1], v, path) {
				d.unknownKey(k, path, d.keys(v.Type()))
			}
			continue
		}
		d.value(n.Content[i+1], v.Field(fields[j].index), joinPath(path, name))
	}
}

// alias decodes a deprecated key's value into the key that replaced it
// and records the deprecation; false when k is no deprecated key.
func (d *decoder) alias(k, val *yaml.Node, v reflect.Value, path string) bool {
	old := joinPath(path, k.Value)
	to, ok := aliasOf(old)
	if !ok {
		return false
	}
	for _, key := range relativeKeys(path, to) {
		j := slices.IndexFunc(d.structFields(v.Type()), func(f field) bool { return f.key == key })
		v = v.Field(d.structFields(v.Type())[j].index)
	}
	d.deprecated = append(d.deprecated, Deprecation{Line: k.Line, Alias: Alias{Old: old, New: to}})
	d.value(val, v, to)
	return true
}

// bothSet reports every deprecated key set beside the key that replaced
// it: which one holds would depend on their order in the file.
func (d *decoder) bothSet() {
	for _, dep := range d.deprecated {
		if d.sets[dep.New] > 1 {
			d.problems = append(d.problems, problem{line: dep.Line, path: dep.Old,
				msg: fmt.Sprintf("is deprecated and %s is set too, want only %s", dep.New, dep.New)})
			d.failed[dep.New] = true
		}
	}
}

func (d *decoder) unknownKey(k *yaml.Node, path string, valid []string) {
	msg := fmt.Sprintf("unknown key %q", short(k.Value))
	if path != "" {
		msg += " in " + path
	}
	if s := suggest(k.Value, valid); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else {
		msg += fmt.Sprintf(" (valid keys: %s)", strings.Join(valid, ", "))
	}
	// The location is in the message already: "unknown key "x" in agent".
	d.addf(k, "", "%s", msg)
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.addf(n, path, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		d.value(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	want := typeName(v.Type())
	if n.Kind != yaml.ScalarNode {
		d.addf(n, path, "want %s, got %s", want, describe(n))
		return
	}
	// yaml.v3 truncates 2.5 into an int 2 without a word: an integer
	// field takes integers only.
	tag := n.ShortTag()
	isInt := v.CanInt() || v.CanUint()
	if isInt && tag != "!!int" || v.CanFloat() && tag != "!!int" && tag != "!!float" {
		d.addf(n, path, "want %s, got %s", want, describe(n))
		return
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.addf(n, path, "want %s, got %s", want, describe(n))
	}
}

// duration parses Go durations ("90s", "15m", "1h30m"). yaml.v3 would
// decode those into a time.Duration too, but its error names neither the
// key nor the accepted form, and it would take no plain 0.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	const want = `want a duration like "90s", "15m" or "1h"`
	if n.Kind != yaml.ScalarNode {
		d.addf(n, path, "%s, got %s", want, describe(n))
		return
	}
	if n.ShortTag() == "!!int" {
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil && i == 0 {
			v.SetInt(0)
			return
		}
		d.addf(n, path, "%s, got %s: a number needs a unit", want, describe(n))
		return
	}
	if n.ShortTag() != "!!str" {
		d.addf(n, path, "%s, got %s", want, describe(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		hint := ""
		if strings.HasSuffix(n.Value, "d") || strings.HasSuffix(n.Value, "w") {
			hint = ` (the largest unit is h: 90 days is "2160h")`
		}
		d.addf(n, path, "%s, got %s%s", want, describe(n), hint)
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) structFields(t reflect.Type) []field {
	if fs, ok := d.fields[t]; ok {
		return fs
	}
	var fs []field
	for i := range t.NumField() {
		if k := yamlKey(t.Field(i)); k != "" {
			fs = append(fs, field{key: k, index: i})
		}
	}
	if d.fields == nil {
		d.fields = map[reflect.Type][]field{}
	}
	d.fields[t] = fs
	return fs
}

func (d *decoder) keys(t reflect.Type) []string {
	var ks []string
	for _, f := range d.structFields(t) {
		ks = append(ks, f.key)
	}
	return ks
}

// yamlKey returns the YAML key of a struct field, or "" for a field that
// has none.
func yamlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if k == "-" {
		return ""
	}
	if k == "" {
		k = strings.ToLower(f.Name)
	}
	return k
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe says what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(short(n.Value))
	default:
		return "an unsupported YAML node"
	}
}

// short cuts a value quoted in a message to a readable length.
func short(s string) string {
	const limit = 80
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "..."
}

// typeName names a Go type the way the docs do.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	default:
		return t.String()
	}
}

// suggest returns the valid key closest to key, or "" when none is close
// enough to be a likely typo.
func suggest(key string, valid []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(s))
	}
	best, bestDist := "", -1
	for _, v := range valid {
		if norm(v) == norm(key) {
			return v
		}
		dist := levenshtein(key, v)
		if bestDist < 0 || dist < bestDist {
			best, bestDist = v, dist
		}
	}
	limit := min(3, max(1, len(key)/3))
	if bestDist >= 0 && bestDist <= limit {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // no key is that long: not a typo, and cheap
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// normalize applies what Load promises after validation: "host" leaves
// Targets and relative file paths are made relative to the config's
// directory, as Prometheus does for files a config names.
func (c *Config) normalize(dir string) {
	c.Targets = slices.DeleteFunc(c.Targets, func(t measure.Target) bool { return t == measure.TargetHost })
	for _, p := range []*string{&c.Agent.WebConfigFile, &c.Agent.APITokenFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}
