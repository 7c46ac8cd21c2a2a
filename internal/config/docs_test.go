package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/fio"
)

const (
	docsPath    = "../../docs/configuration.md"
	examplePath = "../../docs/config.example.yml"
)

// keyPath is one YAML key of the schema, found by reflection over the
// struct tags, so that the docs tests follow every field added later.
type keyPath struct {
	path    string       // agent.interval, engines[].host
	key     string       // interval
	index   []int        // field index from Config; nil under engines[]
	typ     reflect.Type // the field's type
	section bool         // a mapping or a list of mappings, not a value
}

// leafPaths lists every key of t, sections before their keys.
func leafPaths(t reflect.Type, prefix string) []keyPath {
	var out []keyPath
	for i := range t.NumField() {
		f := t.Field(i)
		key := yamlKey(f)
		if key == "" {
			continue
		}
		path := joinPath(prefix, key)
		var index []int
		if !strings.Contains(prefix, "[]") {
			index = []int{i}
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, keyPath{path: path, key: key, index: index, typ: f.Type, section: true})
			for _, sub := range leafPaths(f.Type, path) {
				if sub.index != nil {
					sub.index = append(slices.Clone(index), sub.index...)
				}
				out = append(out, sub)
			}
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, keyPath{path: path, key: key, index: index, typ: f.Type, section: true})
			for _, sub := range leafPaths(f.Type.Elem(), path+"[]") {
				sub.index = nil
				out = append(out, sub)
			}
		default:
			out = append(out, keyPath{path: path, key: key, index: index, typ: f.Type})
		}
	}
	return out
}

func fieldAt(v reflect.Value, index []int) reflect.Value {
	for _, i := range index {
		v = v.Field(i)
	}
	return v
}

func TestLeafPathsSeesEverything(t *testing.T) {
	paths := leafPaths(reflect.TypeFor[Config](), "")
	var names []string
	for _, p := range paths {
		names = append(names, p.path)
	}
	for _, want := range []string{"profile", "engines", "engines[].probe_image", "agent.churn_quiet_period", "detector.confirm_min", "free_space.min_free_bytes"} {
		if !slices.Contains(names, want) {
			t.Errorf("leafPaths misses %s: %v", want, names)
		}
	}
}

func readDocs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocsMentionEveryKey: docs/configuration.md documents every YAML key
// of the structs, values in the `[ key: <type> | default = x ]` notation.
func TestDocsMentionEveryKey(t *testing.T) {
	docs := readDocs(t)
	for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
		k := regexp.QuoteMeta(p.key)
		var re *regexp.Regexp
		if p.section {
			re = regexp.MustCompile(`(?m)^\s*` + k + `:\s*$`)
		} else {
			re = regexp.MustCompile(`(?m)^\s*(\[ ` + k + `: <[^>]+> \| default = .+ \]|` + k + `: <[^>]+>)\s*$`)
		}
		if !re.MatchString(docs) {
			t.Errorf("%s: %s is not documented (want a line matching %s)", docsPath, p.path, re)
		}
	}
}

var docDefaultRE = regexp.MustCompile(`(?m)^\s*\[ (\w+): <[^>]+> \| default = (.+) \]\s*$`)

// TestDocsDefaultsMatch decodes every "default = x" of the docs as the YAML
// value of its key and compares it with Default, so the docs cannot drift
// from the code. A key that stands in several places (a budget's keys:
// budget.rounds, agent.budget.rounds) is matched by order: the docs
// document its places in the schema's order.
func TestDocsDefaultsMatch(t *testing.T) {
	byKey := map[string][]keyPath{}
	for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
		if !p.section {
			byKey[p.key] = append(byKey[p.key], p)
		}
	}
	matches := docDefaultRE.FindAllStringSubmatch(readDocs(t), -1)
	documented := map[string]int{}
	for _, m := range matches {
		key, text := m[1], m[2]
		ps, ok := byKey[key]
		if !ok {
			t.Errorf("docs give a default for %q, which is not a key", key)
			continue
		}
		if documented[key] >= len(ps) {
			t.Errorf("docs give a default for %q %d times, the schema has it %d times", key, documented[key]+1, len(ps))
			continue
		}
		p := ps[documented[key]]
		documented[key]++
		var doc string
		engine := strings.HasPrefix(p.path, "engines[].")
		if engine {
			doc = fmt.Sprintf("engines:\n  - name: x\n    %s: %s\n", key, text)
		} else {
			parts := strings.Split(p.path, ".")
			var b strings.Builder
			for i, part := range parts {
				b.WriteString(strings.Repeat("  ", i) + part + ":")
				if i < len(parts)-1 {
					b.WriteString("\n")
				}
			}
			doc = b.String() + " " + text + "\n"
		}
		c, err := parse([]byte(doc))
		if err != nil {
			t.Errorf("%s: documented default %s does not load: %v", p.path, text, err)
			continue
		}
		var got, want any
		if engine {
			got = fieldByKey(reflect.ValueOf(c.Engines[0]), key).Interface()
			want = fieldByKey(reflect.ValueOf(Engine{}), key).Interface()
		} else {
			got = fieldAt(reflect.ValueOf(*c), p.index).Interface()
			want = fieldAt(reflect.ValueOf(*Default()), p.index).Interface()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: docs say default = %s (%v), Default() has %v", p.path, text, got, want)
		}
	}
	for key, ps := range byKey {
		for _, p := range ps[min(documented[key], len(ps)):] {
			if key != "name" {
				t.Errorf("%s: no `[ %s: <type> | default = x ]` line in the docs", p.path, key)
			}
		}
	}
}

func fieldByKey(v reflect.Value, key string) reflect.Value {
	for i := range v.NumField() {
		if yamlKey(v.Type().Field(i)) == key {
			return v.Field(i)
		}
	}
	panic("no field " + key)
}

// TestDocsProfileRounds: the docs quote each profile's default rounds.
func TestDocsProfileRounds(t *testing.T) {
	docs := readDocs(t)
	for _, name := range fio.ProfileNames() {
		p, err := fio.LookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%s: %d", name, p.DefaultRounds)
		if p.DefaultRounds == 0 {
			s = name + ": adaptive"
		}
		if !strings.Contains(docs, s) {
			t.Errorf("docs do not say %q (the profile's default rounds)", s)
		}
	}
}

// fileKeys lists the key paths a YAML file sets, in the leafPaths form.
func fileKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := joinPath(prefix, n.Content[i].Value)
				keys[p] = true
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, prefix+"[]")
			}
		}
	}
	walk(&doc, "")
	return keys
}

// TestFilesSetEveryKey: the docs example and the full test file show
// every key.
func TestFilesSetEveryKey(t *testing.T) {
	for _, file := range []string{examplePath, "testdata/good/full.yml"} {
		keys := fileKeys(t, file)
		for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
			if !keys[p.path] {
				t.Errorf("%s does not set %s", file, p.path)
			}
		}
	}
}

// TestExampleShowsDefaults: apart from its engines list, which spells out
// the default engine, the example is the built-in configuration.
func TestExampleShowsDefaults(t *testing.T) {
	c, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Engines) != 1 || c.Engines[0].Name != DefaultEngineName {
		t.Errorf("example engines = %+v, want the one default engine", c.Engines)
	}
	c.Engines = nil
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("example differs from Default():\n got %+v\nwant %+v", c, Default())
	}
}
