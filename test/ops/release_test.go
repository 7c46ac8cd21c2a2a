package ops

import (
	"bytes"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
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

// releaseClone copies the repository's files as they are in the work
// tree (tracked and new, not ignored) into dir, a fresh git repository of
// one commit, as a fresh clone would have them.
func releaseClone(dir string) error {
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(repoPath(f))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink the build does not need
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(repoPath(f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	env := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z"}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "release test"}} {
		if r := asshipped.Run(time.Minute, dir, env, "git", args...); r.Err != nil {
			return fmt.Errorf("git %v: %w\n%s%s", args, r.Err, r.Stdout, r.Stderr)
		}
	}
	return nil
}

// The release that `make release RELEASE_IMAGE=0` builds in a fresh copy of
// the repository, once per test binary run: TestReleaseArtifacts checks it,
// TestReleaseImageIndex imports its two-platform image,
// TestShippedDeploymentsUnderLoad installs its .deb. Its directory outlives
// the test that built it (TestMain removes it).
var release struct {
	once     sync.Once
	mu       sync.Mutex // held while building: removeRelease may run beside a build no test waited for
	dist     string
	err      string
	tmp      string
	duration time.Duration
}

// buildRelease builds that release on its first call and waits for it on
// the others. It takes no *testing.T: TestShippedDeploymentsUnderLoad
// starts it in the background, so that the build (minutes of a loaded
// machine) runs while its box starts instead of after.
func buildRelease() {
	release.once.Do(func() {
		release.mu.Lock()
		defer release.mu.Unlock()
		tmp, err := os.MkdirTemp("", "layerprobe-release-")
		if err != nil {
			release.err = err.Error()
			return
		}
		release.tmp = tmp
		dir := filepath.Join(tmp, "layerprobe")
		if err := releaseClone(dir); err != nil {
			release.err = "copy the repository: " + err.Error()
			return
		}
		start := time.Now()
		r := asshipped.Run(20*time.Minute, dir, nil, "make", "release", "RELEASE_IMAGE=0")
		release.duration = time.Since(start)
		if r.Err != nil {
			release.err = "make release:\n" + testharness.Tail(r.Stdout+r.Stderr, 60)
			return
		}
		release.dist = filepath.Join(dir, "dist")
	})
}

// releaseDist returns the dist directory of that release, building it on
// the first call.
func releaseDist(t *testing.T) string {
	t.Helper()
	start := time.Now()
	buildRelease()
	if release.err != "" {
		t.Fatal(release.err)
	}
	t.Logf("make release took %s; this test waited %s for it", release.duration.Round(time.Second), time.Since(start).Round(time.Second))
	return release.dist
}

// removeRelease deletes the release's directory (TestMain).
func removeRelease() {
	release.mu.Lock()
	defer release.mu.Unlock()
	if release.tmp != "" {
		os.RemoveAll(release.tmp)
	}
}

// TestReleaseArtifacts runs `make release` (goreleaser, nfpm, cyclonedx-gomod;
// the image is TestAgentImage's) in a fresh copy of the repository and checks
// every artifact: static linux/amd64 and linux/arm64 binaries stamped with
// the VERSION file and the commit, archives, SBOMs, SHA256SUMS that verify,
// and .debs that depend on fio alone and carry the binary in /usr/bin, the
// systemd unit running it, the default configuration as a conffile and the
// man page.
func TestReleaseArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the release")
	}
	dpkgDeb := tool(t, "dpkg-deb")
	queue.Parallel(t)
	version := versionFile(t)
	dist := releaseDist(t)
	dir := filepath.Dir(dist)
	rev := strings.TrimSpace(run(t, time.Minute, dir, nil, "git", "rev-parse", "--short=12", "HEAD").stdout)

	// Every artifact is in SHA256SUMS, and the sums verify.
	var want []string
	for _, arch := range []string{"amd64", "arm64"} {
		want = append(want, "layerprobe-"+version+".linux-"+arch+".tar.gz", "layerprobe-"+version+".linux-"+arch+".cdx.json",
			"layerprobe_"+version+"_"+arch+".deb",
			// darwin: archives and SBOMs, no .deb.
			"layerprobe-"+version+".darwin-"+arch+".tar.gz", "layerprobe-"+version+".darwin-"+arch+".cdx.json")
	}
	// The two-platform image (TestReleaseImageIndex reads it).
	want = append(want, "layerprobe-"+version+".oci.tar")
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range want {
		if !regexp.MustCompile(`(?m)^[0-9a-f]{64}  ` + regexp.QuoteMeta(f) + `$`).Match(sums) {
			t.Errorf("SHA256SUMS lacks %s:\n%s", f, sums)
		}
		if fi, err := os.Stat(filepath.Join(dist, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if r := run(t, time.Minute, dist, nil, "sha256sum", "--strict", "-c", "SHA256SUMS"); r.err != nil {
		t.Errorf("sha256sum -c SHA256SUMS:\n%s", r)
	}

	// The binaries: static, of their architecture, stamped.
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		bins, _ := filepath.Glob(filepath.Join(dist, "layerprobe_linux_"+arch+"_*", "layerprobe"))
		if len(bins) != 1 {
			t.Errorf("linux/%s binary: %v", arch, bins)
			continue
		}
		f, err := elf.Open(bins[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("linux/%s binary has an interpreter: not static", arch)
			}
		}
		if f.Machine != machine {
			t.Errorf("linux/%s binary is for %v", arch, f.Machine)
		}
		f.Close()
		fi, _ := os.Stat(bins[0])
		t.Logf("linux/%s binary: %.1f MiB", arch, float64(fi.Size())/(1<<20))
		if arch == runtime.GOARCH {
			v := run(t, time.Minute, "", nil, bins[0], "--version")
			if !strings.HasPrefix(v.stdout, "layerprobe, version "+version+" (revision: "+rev+")\n  build date:       2026-01-02T03:04:05Z\n") {
				t.Errorf("released binary's --version:\n%s\nwant version %s, revision %s and the commit's date", v.stdout, version, rev)
			}
		}
	}

	// The darwin binaries: Mach-O of their architecture, and no package.
	for arch, cpu := range map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64} {
		bins, _ := filepath.Glob(filepath.Join(dist, "layerprobe_darwin_"+arch+"_*", "layerprobe"))
		if len(bins) != 1 {
			t.Errorf("darwin/%s binary: %v", arch, bins)
			continue
		}
		f, err := macho.Open(bins[0])
		if err != nil {
			t.Errorf("darwin/%s binary: %v", arch, err)
			continue
		}
		if f.Cpu != cpu {
			t.Errorf("darwin/%s binary is for %v", arch, f.Cpu)
		}
		f.Close()
	}
	if debs, _ := filepath.Glob(filepath.Join(dist, "*darwin*.deb")); len(debs) > 0 {
		t.Errorf("darwin .deb packages: %v", debs)
	}

	// The SBOM names the modules compiled in.
	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	b, err := os.ReadFile(filepath.Join(dist, "layerprobe-"+version+".linux-amd64.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &bom); err != nil || bom.BOMFormat != "CycloneDX" {
		t.Errorf("SBOM: %v, format %q", err, bom.BOMFormat)
	}
	if !slices.ContainsFunc(bom.Components, func(c struct {
		Name string `json:"name"`
	}) bool {
		return c.Name == "github.com/spf13/cobra"
	}) {
		t.Errorf("SBOM lists %d components, not cobra", len(bom.Components))
	}

	// The archive: the binary and its companions in one directory.
	tarList := run(t, time.Minute, dist, nil, "tar", "-tzf", "layerprobe-"+version+".linux-amd64.tar.gz").stdout
	for _, f := range []string{"layerprobe", "LICENSE", "CHANGELOG.md", "README.md", "layerprobe.service", "config.yaml", "layerprobe.1"} {
		if !strings.Contains(tarList, "layerprobe-"+version+".linux-amd64/"+f+"\n") {
			t.Errorf("archive lacks %s:\n%s", f, tarList)
		}
	}

	// The .deb.
	for _, arch := range []string{"amd64", "arm64"} {
		deb := filepath.Join(dist, "layerprobe_"+version+"_"+arch+".deb")
		field := func(name string) string {
			return strings.TrimSpace(run(t, time.Minute, "", nil, dpkgDeb, "-f", deb, name).stdout)
		}
		if got := field("Depends"); got != "fio" {
			t.Errorf("%s: Depends %q, want fio alone", arch, got)
		}
		if got := field("Version"); got != version {
			t.Errorf("%s: Version %q, want %s", arch, got, version)
		}
		if got := field("Architecture"); got != arch {
			t.Errorf("%s: Architecture %q", arch, got)
		}
		contents := run(t, time.Minute, "", nil, dpkgDeb, "-c", deb).stdout
		for _, f := range []string{"./usr/bin/layerprobe", "./lib/systemd/system/layerprobe.service", "./etc/layerprobe/config.yaml",
			"./usr/share/man/man1/layerprobe.1.gz", "./usr/share/doc/layerprobe/copyright"} {
			if !regexp.MustCompile(`(?m) ` + regexp.QuoteMeta(f) + `$`).MatchString(contents) {
				t.Errorf("%s .deb lacks %s:\n%s", arch, f, contents)
			}
		}
		x := filepath.Join(t.TempDir(), arch)
		if r := run(t, time.Minute, "", nil, dpkgDeb, "-R", deb, x); r.err != nil {
			t.Fatalf("dpkg-deb -R:\n%s", r)
		}
		if conf, _ := os.ReadFile(filepath.Join(x, "DEBIAN", "conffiles")); strings.TrimSpace(string(conf)) != "/etc/layerprobe/config.yaml" {
			t.Errorf("%s conffiles %q, want /etc/layerprobe/config.yaml", arch, conf)
		}
		unit, _ := os.ReadFile(filepath.Join(x, "lib/systemd/system/layerprobe.service"))
		repoUnit, _ := os.ReadFile(repoPath(unitFile))
		if !bytes.Equal(unit, repoUnit) || !strings.Contains(string(unit), "\nExecStart=/usr/bin/layerprobe agent\n") {
			t.Errorf("%s .deb's unit differs from %s or does not run /usr/bin/layerprobe", arch, unitFile)
		}
		for _, s := range []string{"postinst", "prerm", "postrm"} {
			if fi, err := os.Stat(filepath.Join(x, "DEBIAN", s)); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s .deb's %s: %v", arch, s, err)
			}
		}
		if arch == runtime.GOARCH {
			if v := run(t, time.Minute, "", nil, filepath.Join(x, "usr/bin/layerprobe"), "config", "check", filepath.Join(x, "etc/layerprobe/config.yaml")); v.err != nil {
				t.Errorf("the .deb's default configuration does not check:\n%s", v)
			}
			man := run(t, time.Minute, "", nil, "sh", "-c", "gzip -dc "+filepath.Join(x, "usr/share/man/man1/layerprobe.1.gz"))
			for _, w := range []string{".TH LAYERPROBE 1", `.SS "layerprobe agent"`, `.SS "layerprobe overhead"`, "--web.config.file"} {
				if !strings.Contains(man.stdout, w) {
					t.Errorf("man page lacks %q", w)
				}
			}
		}
	}
}

// TestReleaseToolVersionsAgree: scripts/install-deps.sh prebuilds the
// release tools `make release` runs, at the same versions.
func TestReleaseToolVersionsAgree(t *testing.T) {
	mk := readFile(t, repoPath("Makefile"))
	deps := readFile(t, repoPath("scripts/install-deps.sh"))
	for _, c := range []struct{ makeVar, module, depsVar string }{
		{"GORELEASER", "github.com/goreleaser/goreleaser/v2", "goreleaser_version"},
		{"CYCLONEDX", "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod", "cyclonedx_version"},
	} {
		m := regexp.MustCompile(`(?m)^` + c.makeVar + `\s*:=\s*` + regexp.QuoteMeta(c.module) + `@(\S+)$`).FindStringSubmatch(mk)
		d := regexp.MustCompile(`(?m)^` + c.depsVar + `=(\S+)$`).FindStringSubmatch(deps)
		if m == nil || d == nil || m[1] != d[1] {
			t.Errorf("%s: Makefile %v, install-deps.sh %v; want one version", c.module, m, d)
		}
	}
}
