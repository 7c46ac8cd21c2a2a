// Package ops tests the operators' kit: the Grafana dashboards, the
// Prometheus rules, and the deployment files (systemd unit, agent image,
// compose stack, Kubernetes manifests).
//
// Tests that only read files run everywhere (also with -short). Tests that
// need root, private Docker daemons or the tools scripts/install-deps.sh
// installs (promtool, prometheus, amtool, debootstrap, the Docker Compose
// v2 plugin, yamllint, systemd-analyze, kubernetes-validate) skip without them, and
// fail instead when the environment variable CI is set: a CI machine
// without them is broken.
package ops

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// repoRoot is the repository's top directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}()

// queue runs the parallel tests four at a time, the longest first: the
// deployments under load take a quarter of an hour and end the package
// that much later when they start last.
var queue = testharness.NewQueue(4,
	"TestShippedDeploymentsUnderLoad", "TestSeriesBudget", "TestAgentImage", "TestPrometheusScrapesAgent",
	"TestFleetInPrometheus", "TestPromtoolRules", "TestReleaseArtifacts", "TestReleaseImageIndex", "TestFleetClusters", "TestDocsPromQLExamples")

// repoPath joins a slash-separated path below the repository root.
func repoPath(p string) string { return filepath.Join(repoRoot, filepath.FromSlash(p)) }

// needsSystem marks a test that starts daemons or builds images: skipped
// with -short, and it needs root.
func needsSystem(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs root, daemons and real tools")
	}
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "needs root")
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
	testharness.SkipOrFail(t, "%s not found (scripts/install-deps.sh installs it)", name)
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

// composeV2 returns the command line of Docker Compose v2, the docker CLI
// plugin (`docker compose`) that users run: Compose 1.x, Debian 12's
// docker-compose, is out of support and rejects keys the shipped compose
// file uses (`cgroup`). scripts/install-deps.sh builds the plugin.
func composeV2(t testing.TB) []string {
	t.Helper()
	docker := tool(t, "docker")
	r := run(t, time.Minute, "", nil, docker, "compose", "version", "--short")
	if r.err != nil || !strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(r.stdout), "v"), "2.") {
		testharness.SkipOrFail(t, "Docker Compose v2 (the docker CLI plugin) not found (scripts/install-deps.sh builds it): %s", r)
		return nil
	}
	return []string{docker, "compose"}
}

// run runs a command to completion within timeout, in dir ("" = the
// repository root), with env added to the test's environment.
func run(t testing.TB, timeout time.Duration, dir string, env []string, name string, args ...string) cmdResult {
	t.Helper()
	if dir == "" {
		dir = repoRoot
	}
	r := asshipped.Run(timeout, dir, env, name, args...)
	return cmdResult{r.Stdout, r.Stderr, r.Err}
}

// agentBinary returns the release layerprobe binary, built once per test
// binary run (removed in TestMain).
func agentBinary(t testing.TB) string {
	t.Helper()
	bin, err := testharness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	testharness.RemoveBinary()
	removeRelease()
	os.Exit(code)
}

// tmpfsMagic is the f_type statfs(2) reports for tmpfs.
const tmpfsMagic = 0x01021994

// memDir is a temporary directory on a memory file system, removed when
// the test ends. Prometheus's and promtool's TSDBs go there: what they
// store is not what the suite measures, and on the disk their fsyncs wait
// behind the fio jobs of the packages that run beside this one (promtool
// test rules took minutes of wall clock there for seconds of CPU).
//
// As root it is a ramfs of its own, elsewhere a directory in /dev/shm's
// tmpfs, or t.TempDir() where there is none. Prometheus and promtool
// preallocate every chunk file (512 MiB for each block promtool writes,
// 128 MiB for a head's): tmpfs allocates and zeroes that memory, ramfs
// has no fallocate and they fall back to a sparse ftruncate. The fleet
// test's rule backfill writes some 400 blocks: promtool's kernel time was
// 2 min 20 s on tmpfs, the whole test's 8 s on ramfs.
func memDir(t testing.TB) string {
	t.Helper()
	if os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "layerprobe-ops-")
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("ramfs", dir, "ramfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err == nil {
			t.Cleanup(func() {
				// Lazily: a server the test started may still hold a file
				// open for a moment; the memory goes with the last one.
				if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
					t.Errorf("unmount %s: %v", dir, err)
				}
				os.Remove(dir)
			})
			return dir
		}
		os.Remove(dir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || int64(st.Type) != tmpfsMagic {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "layerprobe-ops-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
