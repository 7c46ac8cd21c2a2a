package report

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// docSections maps every struct type that appears in the JSON document to
// the heading of its section in docs/output.md.
var docSections = map[reflect.Type]string{
	reflect.TypeFor[Run]():                   "Run",
	reflect.TypeFor[Engine]():                "Engine",
	reflect.TypeFor[Error]():                 "Engine error",
	reflect.TypeFor[measure.Result]():        "Result",
	reflect.TypeFor[measure.Raw]():           "Raw",
	reflect.TypeFor[measure.Overhead]():      "Overhead",
	reflect.TypeFor[measure.FailedRound]():   "Failure",
	reflect.TypeFor[measure.Sample]():        "Sample",
	reflect.TypeFor[measure.Op]():            "Op",
	reflect.TypeFor[measure.Histogram]():     "Histogram",
	reflect.TypeFor[measure.Failure]():       "Sample error",
	reflect.TypeFor[Cold]():                  "Cold",
	reflect.TypeFor[measure.CopyUp]():        "Copy-up",
	reflect.TypeFor[measure.CopyUpSize]():    "Copy-up size",
	reflect.TypeFor[measure.CopyUpSample]():  "Copy-up sample",
	reflect.TypeFor[measure.Lookup]():        "Lookup",
	reflect.TypeFor[measure.LookupSummary](): "Lookup summary",
	reflect.TypeFor[measure.LookupSample]():  "Lookup sample",
	reflect.TypeFor[measure.Startup]():       "Start-up",
	reflect.TypeFor[measure.StartupSize]():   "Start-up size",
	reflect.TypeFor[measure.StartupSample](): "Start-up sample",
}

// jsonFields walks the JSON shape of t and records, per struct type, the
// JSON names of its fields (embedded structs without a name are inlined,
// as encoding/json does).
func jsonFields(t *testing.T, typ reflect.Type, into map[reflect.Type][]string) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
		return
	}
	if _, seen := into[typ]; seen {
		return
	}
	if _, ok := docSections[typ]; !ok {
		t.Fatalf("type %v appears in the JSON output but has no section in docSections; document it in docs/output.md", typ)
	}
	into[typ] = nil
	var walk func(s reflect.Type)
	walk = func(s reflect.Type) {
		for f := range s.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			into[typ] = append(into[typ], name)
			jsonFields(t, f.Type, into)
		}
	}
	walk(typ)
}

// section returns the body of the "### title" section of doc.
func section(doc, title string) (string, bool) {
	_, rest, ok := strings.Cut(doc, "\n### "+title+"\n")
	if !ok {
		return "", false
	}
	if i := strings.Index(rest, "\n#"); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

var docRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|")

// TestDocsCoverJSONFields keeps docs/output.md and the Go types in step:
// every JSON field has a row in its type's table, and every row names a
// real field.
func TestDocsCoverJSONFields(t *testing.T) {
	raw, err := os.ReadFile("../../docs/output.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	fields := map[reflect.Type][]string{}
	jsonFields(t, reflect.TypeFor[Run](), fields)
	if len(fields) != len(docSections) {
		t.Errorf("walked %d types, docSections lists %d: a type left the output?", len(fields), len(docSections))
	}
	for typ, names := range fields {
		title := docSections[typ]
		body, ok := section(doc, title)
		if !ok {
			t.Errorf("docs/output.md has no \"### %s\" section for %v", title, typ)
			continue
		}
		var documented []string
		for _, m := range docRow.FindAllStringSubmatch(body, -1) {
			documented = append(documented, m[1])
		}
		for _, n := range names {
			if !slices.Contains(documented, n) {
				t.Errorf("docs/output.md section %q lacks a row for JSON field %q of %v", title, n, typ)
			}
		}
		for _, d := range documented {
			if !slices.Contains(names, d) && !(title == "Result" && slices.Contains(measure.Metrics, d)) {
				t.Errorf("docs/output.md section %q documents %q, which %v does not have", title, d, typ)
			}
		}
	}
	// The metric names are documented too (they are keys of "overhead").
	body, _ := section(doc, "Result")
	for _, m := range measure.Metrics {
		if !strings.Contains(body, "| `"+m+"` |") {
			t.Errorf("docs/output.md does not document metric %q", m)
		}
	}
}
