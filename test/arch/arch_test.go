// Package arch checks docs/architecture.md against the code: every package
// of the product and of the benchmark belongs to a part, every import
// between parts is one the page allows, none is one it forbids, and the
// libraries the design names stay in their one package. The rules are read
// from the page's own tables, so the page and the imports cannot drift
// apart silently.
package arch

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's top directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}()

const modulePath = "github.com/layerprobe/layerprobe"

// part is one row of the page's parts table.
type part struct {
	name      string
	level     int
	paths     []string // repository paths: "dir/" for a tree, "dir/file.go" for one package
	mayImport []string
}

// rule is one row of the page's never table.
type rule struct{ from, to, why string }

// page is what the test reads from docs/architecture.md.
type page struct {
	parts     []part
	never     []rule
	libraries map[string]string // import path prefix -> the one product package
}

// table returns the body rows of the first table after the heading, each
// as its trimmed cells.
func table(md, heading string) ([][]string, error) {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return nil, fmt.Errorf("no heading %q", heading)
	}
	var rows [][]string
	sc := bufio.NewScanner(strings.NewReader(md[i+len(heading)+2:]))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 || strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		return nil, fmt.Errorf("%q: no table with a body under it", heading)
	}
	return rows[2:], nil // header and separator
}

// codes returns the `...` spans of a cell.
func codes(cell string) []string {
	var out []string
	for {
		a := strings.Index(cell, "`")
		if a < 0 {
			return out
		}
		b := strings.Index(cell[a+1:], "`")
		if b < 0 {
			return out
		}
		out = append(out, cell[a+1:a+1+b])
		cell = cell[a+2+b:]
	}
}

// list splits "A, B, C" into names.
func list(cell string) []string {
	var out []string
	for _, s := range strings.Split(cell, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func readPage(path string) (*page, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := string(b)
	p := &page{libraries: map[string]string{}}
	rows, err := table(md, "## The parts")
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if len(r) != 5 {
			return nil, fmt.Errorf("parts table: row %q has %d cells, want 5", r, len(r))
		}
		level, err := strconv.Atoi(r[0])
		if err != nil {
			return nil, fmt.Errorf("parts table: level %q: %w", r[0], err)
		}
		p.parts = append(p.parts, part{name: r[1], level: level, paths: codes(r[2]), mayImport: list(r[4])})
	}
	if rows, err = table(md, "## Never"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if len(r) != 3 {
			return nil, fmt.Errorf("never table: row %q has %d cells, want 3", r, len(r))
		}
		p.never = append(p.never, rule{from: r[0], to: r[1], why: r[2]})
	}
	if rows, err = table(md, "## Libraries with one home"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		lib, home := codes(r[0]), codes(r[1])
		if len(r) != 2 || len(lib) != 1 || len(home) != 1 {
			return nil, fmt.Errorf("libraries table: row %q: want `library` | `package`", r)
		}
		p.libraries[lib[0]] = home[0]
	}
	return p, nil
}

func (p *page) part(name string) *part {
	for i := range p.parts {
		if p.parts[i].name == name {
			return &p.parts[i]
		}
	}
	return nil
}

// partOf returns the part of a package, by its repository path ("" for
// the module root's package, "internal/agent", "bench"): the part with the
// longest path that is the package's directory or a tree above it.
func (p *page) partOf(dir string) string {
	best, bestLen := "", -1
	for _, pt := range p.parts {
		for _, path := range pt.paths {
			var match bool
			if tree, ok := strings.CutSuffix(path, "/"); ok {
				match = dir == tree || strings.HasPrefix(dir, tree+"/")
			} else {
				match = dir == filepath.ToSlash(filepath.Dir(path))
			}
			if match && len(path) > bestLen {
				best, bestLen = pt.name, len(path)
			}
		}
	}
	return best
}

func (p *page) neverRule(from, to string) *rule {
	for i, r := range p.never {
		if r.from == from && r.to == to {
			return &p.never[i]
		}
	}
	return nil
}

// pkg is one package as go list reports it.
type pkg struct {
	dir     string // repository path
	imports []string
}

// listPackages runs go list in the module at dir (relative to the
// repository) and returns its packages with Go files outside tests (test-only
// packages, such as test/e2e and this one, belong to no part).
func listPackages(t *testing.T, dir string, tags ...string) []pkg {
	t.Helper()
	args := []string{"list", "-f", `{{if .GoFiles}}{{.ImportPath}} {{join .Imports " "}}{{end}}`}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = filepath.Join(repoRoot, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", cmd.Dir, err, stderr.String())
	}
	var pkgs []pkg
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		rel, ok := repoPath(fields[0])
		if !ok {
			t.Fatalf("go list in %s: package %s outside the repository's modules", dir, fields[0])
		}
		pkgs = append(pkgs, pkg{dir: rel, imports: fields[1:]})
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list in %s: no package", dir)
	}
	return pkgs
}

// repoPath turns an import path of the product or the benchmark into its
// repository path.
func repoPath(importPath string) (string, bool) {
	if importPath == modulePath {
		return "", true
	}
	return strings.CutPrefix(importPath, modulePath+"/")
}

// violations checks the packages' imports against the page.
func (p *page) violations(pkgs []pkg) []string {
	var out []string
	for _, pk := range pkgs {
		from := p.partOf(pk.dir)
		if from == "" {
			out = append(out, fmt.Sprintf("package %s belongs to no part of docs/architecture.md", pk.dir))
			continue
		}
		fp := p.part(from)
		for _, imp := range pk.imports {
			for lib, home := range p.libraries {
				if (imp == strings.TrimSuffix(lib, "/") || strings.HasPrefix(imp, strings.TrimSuffix(lib, "/")+"/")) &&
					pk.dir != home && from != "TestKit" {
					out = append(out, fmt.Sprintf("%s imports %s, which lives only in %s", pk.dir, imp, home))
				}
			}
			dep, ok := repoPath(imp)
			if !ok {
				continue
			}
			to := p.partOf(dep)
			switch {
			case to == "" || to == from:
				// Unplaced packages are reported on their own.
			case p.neverRule(from, to) != nil:
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): never, %s", pk.dir, from, dep, to, p.neverRule(from, to).why))
			case !slices.Contains(fp.mayImport, to):
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), which %s's row does not allow", pk.dir, from, dep, to, from))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The page's tables hold together: every part named exists, every allowed
// import goes down a level, no allowed import is also forbidden, and every
// path the page places exists in the repository.
func TestArchitecturePageIsConsistent(t *testing.T) {
	p, err := readPage(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.parts) < 10 || len(p.never) < 10 || len(p.libraries) < 5 {
		t.Fatalf("read %d parts, %d never rules, %d libraries: the page's tables were not found whole", len(p.parts), len(p.never), len(p.libraries))
	}
	for _, pt := range p.parts {
		if len(pt.paths) == 0 {
			t.Errorf("part %s places no package", pt.name)
		}
		for _, path := range pt.paths {
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(path))); err != nil {
				t.Errorf("part %s: %v", pt.name, err)
			}
		}
		for _, to := range pt.mayImport {
			switch q := p.part(to); {
			case q == nil:
				t.Errorf("part %s may import %q, which is no part", pt.name, to)
			case q.level >= pt.level:
				t.Errorf("part %s (level %d) may import %s (level %d): imports go down a level", pt.name, pt.level, to, q.level)
			}
			if r := p.neverRule(pt.name, to); r != nil {
				t.Errorf("part %s may import %s, which the never table forbids (%s)", pt.name, to, r.why)
			}
		}
	}
	for _, r := range p.never {
		if p.part(r.from) == nil || p.part(r.to) == nil {
			t.Errorf("never rule %s -> %s names no part", r.from, r.to)
		}
	}
}

// The imports of the product (every package with Go files) and of the
// benchmark (build tag bench) hold to the page.
func TestImportsFollowArchitecture(t *testing.T) {
	p, err := readPage(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The benchmark is a module of its own under bench/: its go list
	// names its own packages only.
	pkgs := append(listPackages(t, "."), listPackages(t, "bench", "bench")...)
	for _, v := range p.violations(pkgs) {
		t.Error(v)
	}
}

// The check fails where it should: an unplaced package, a forbidden
// import with its reason, an import the rows do not allow, and a library
// outside its home.
func TestViolationsAreFound(t *testing.T) {
	p, err := readPage(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := p.violations([]pkg{
		{dir: "internal/newthing"},
		{dir: "internal/httpapi", imports: []string{modulePath + "/internal/store"}},
		{dir: "internal/fio", imports: []string{modulePath + "/internal/report"}},
		{dir: "internal/agent", imports: []string{"github.com/moby/moby/client", modulePath + "/internal/engine"}},
		{dir: "internal/engine", imports: []string{modulePath + "/internal/measure"}},
	})
	want := []string{
		"internal/agent imports github.com/moby/moby/client, which lives only in internal/engine/docker",
		"internal/fio (Fio) imports internal/report (Report), which Fio's row does not allow",
		"internal/httpapi (Expose) imports internal/store (Store): never, the API and scrapes read only the agent's Source",
		"package internal/newthing belongs to no part of docs/architecture.md",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
