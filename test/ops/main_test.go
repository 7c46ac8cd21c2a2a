// Package ops tests the operators' kit: the Grafana dashboards, the
// Prometheus rules, and the deployment files (systemd unit, agent image,
// compose stack, Kubernetes manifests).
//
// Tests that only read files run everywhere (also with -short). Tests that
// need root, private Docker daemons or the tools scripts/install-deps.sh
// installs (promtool, prometheus, amtool, debootstrap, docker-compose,
// yamllint, systemd-analyze, kubernetes-validate) skip without them, and
// fail instead when the environment variable CI is set: a CI machine
// without them is broken.
package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// repoRoot is the repository's top directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}()

// repoPath joins a slash-separated path below the repository root.
func repoPath(p string) string { return filepath.Join(repoRoot, filepath.FromSlash(p)) }

// skipOrFail skips the test, except in CI, where a missing prerequisite
// means a broken CI machine.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+" (CI is set: not skipping)", args...)
	}
	t.Skipf(format, args...)
}

// needsSystem marks a test that starts daemons or builds images: skipped
// with -short, and it needs root.
func needsSystem(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs root, daemons and real tools")
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root")
	}
}

// tool finds an executable in PATH, the sbin directories or the extra
// directories given, or skips (fails in CI). scripts/install-deps.sh
// installs every tool these tests name.
func tool(t testing.TB, name string, extraDirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	dirs := append([]string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"}, extraDirs...)
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	skipOrFail(t, "%s not found (scripts/install-deps.sh installs it)", name)
	return ""
}

// cmdResult is what a finished command printed.
type cmdResult struct {
	stdout, stderr string
	err            error
}

func (r cmdResult) String() string {
	return fmt.Sprintf("err: %v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
}

// run runs a command to completion within timeout, in dir ("" = the
// repository root), with env added to the test's environment.
func run(t testing.TB, timeout time.Duration, dir string, env []string, name string, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if dir == "" {
		dir = repoRoot
	}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish within %s: %w", name, timeout, errors.Join(err, ctx.Err()))
	}
	return cmdResult{out.String(), errb.String(), err}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// agentBinary builds the static layerprobe binary once per test binary run
// and returns its path. It is removed in TestMain.
func agentBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "lpops-bin")
		if buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, "layerprobe")
		// The tags of `make build`: test the binary that ships.
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "nomsgpack", "-o", bin, "./cmd/layerprobe")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "layerprobe")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every interval until it returns true or timeout
// passes; it then fails the test with what the last call returned.
func waitFor(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last: %s", what, timeout, last)
		}
		time.Sleep(interval)
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
