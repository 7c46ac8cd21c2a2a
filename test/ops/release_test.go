package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// versionFile is the repository's one version source.
func versionFile(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(repoPath("VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" || strings.ContainsAny(v, " \n") || strings.HasPrefix(v, "v") {
		t.Fatalf("VERSION %q: want one semantic version without a leading v", v)
	}
	return v
}

// TestReleaseVersionFromMakeBuild: `make build` stamps the binary with the
// VERSION file, the commit and the build date, and `layerprobe --version`
// prints them in the Prometheus exporters' shape.
func TestReleaseVersionFromMakeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	want := versionFile(t)
	bin := filepath.Join(t.TempDir(), "layerprobe")
	r := run(t, 5*time.Minute, "", nil, "make", "build", "BIN="+bin)
	if r.err != nil {
		t.Fatalf("make build:\n%s", r)
	}
	r = run(t, time.Minute, "", nil, bin, "--version")
	if r.err != nil {
		t.Fatalf("layerprobe --version:\n%s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	head := "layerprobe, version " + want + " (revision: "
	if !strings.HasPrefix(lines[0], head) {
		t.Fatalf("layerprobe --version first line %q; want it to start with %q", lines[0], head)
	}
	if rev, err := exec.Command("git", "-C", repoRoot, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		if w := head + strings.TrimSpace(string(rev)) + ")"; lines[0] != w {
			t.Errorf("layerprobe --version first line %q; want %q", lines[0], w)
		}
	}
	if !strings.Contains(r.stdout, "build date:") || strings.Contains(r.stdout, "build date:       unknown") {
		t.Errorf("layerprobe --version has no build date:\n%s", r.stdout)
	}
	sub := run(t, time.Minute, "", nil, bin, "version")
	if sub.stdout != r.stdout {
		t.Errorf("layerprobe version %q differs from --version %q", sub.stdout, r.stdout)
	}
}

// TestReleaseLicenseAndChangelog: the Apache-2.0 licence, and a changelog
// whose newest entry is the VERSION file's.
func TestReleaseLicenseAndChangelog(t *testing.T) {
	lic, err := os.ReadFile(repoPath("LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0, January 2004") {
		t.Error("LICENSE is not the Apache License 2.0")
	}
	cl, err := os.ReadFile(repoPath("CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	v := versionFile(t)
	for _, line := range strings.Split(string(cl), "\n") {
		if strings.HasPrefix(line, "## ") {
			if !strings.HasPrefix(line, "## ["+v+"]") {
				t.Errorf("CHANGELOG.md's newest entry %q; want %q first (the VERSION file)", line, "## ["+v+"]")
			}
			return
		}
	}
	t.Error("CHANGELOG.md has no version entry")
}

// TestAgentDepsAreTheAgentsOnly: `make agent` and `make run` install what
// the agent needs (fio, and an engine where none answers) and never the
// test toolchain, which only `make test` (deps-test) and the benchmark
// install.
func TestAgentDepsAreTheAgentsOnly(t *testing.T) {
	b, err := os.ReadFile(repoPath("scripts/install-agent-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"fio": true, "docker.io": true}
	for _, m := range regexp.MustCompile(`need\+=\(([^)]*)\)`).FindAllStringSubmatch(string(b), -1) {
		for _, pkg := range strings.Fields(m[1]) {
			if !allowed[pkg] {
				t.Errorf("install-agent-deps.sh installs %s; the agent needs fio and an engine only", pkg)
			}
		}
	}
	for _, target := range []string{"agent", "run", "test"} {
		r := run(t, time.Minute, "", nil, "make", "-n", target)
		if r.err != nil {
			t.Fatalf("make -n %s:\n%s", target, r)
		}
		agentDeps := strings.Contains(r.stdout, "scripts/install-agent-deps.sh")
		testDeps := strings.Contains(r.stdout, "scripts/install-deps.sh")
		switch {
		case target != "test" && (!agentDeps || testDeps):
			t.Errorf("make %s runs install-agent-deps.sh %v, install-deps.sh %v; want only the agent's", target, agentDeps, testDeps)
		case target == "test" && !testDeps:
			t.Errorf("make test does not install the test toolchain (scripts/install-deps.sh)")
		}
	}
}
