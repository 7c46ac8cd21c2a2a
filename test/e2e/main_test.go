// Package e2e runs the layerprobe binary against real, private dockerd
// daemons with real fio. The tests need root; with env CI set they fail
// rather than skip when something is missing.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// binary is the release layerprobe binary, built once for the package.
var binary string

// queue runs the parallel tests four at a time (each has engines of its
// own, and the machine has two cores), the longest first: these, in the
// order of their length in a full `make test`, the rest after them.
var queue = testharness.NewQueue(4,
	"TestMoreEngines", "TestRunOnPrivateContainerd", "TestRootlessPodman", "TestRunOnPrivateEngines",
	"TestStatusPageInChromium", "TestColdRunOnOverlay2AndBtrfs", "TestStartupCostGrowsWithTheImageOnlyOnVfs",
	"TestAdvisorInTheAgent", "TestAdviseOnContainerd", "TestAgentRetriesAfterBusyStart", "TestRunProgress")

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	var err error
	if binary, err = testharness.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testharness.RemoveBinary()
	if lockDirPath != "" {
		_ = os.RemoveAll(lockDirPath)
	}
	os.Exit(code)
}

// result of one layerprobe invocation.
type result struct {
	stdout, stderr string
	code           int
}

// layerprobe runs the binary against the daemon at host and waits.
func layerprobe(t *testing.T, host string, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = lpEnv(t, host)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run layerprobe %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("layerprobe %v did not finish within %s; stderr:\n%s", args, timeout, errb.String())
	}
	return result{out.String(), errb.String(), code}
}

// startLayerprobe starts the binary against the daemon at host without
// waiting; the test's cleanup kills it if the test has not.
func startLayerprobe(t *testing.T, host string, args ...string) *testharness.Proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = lpEnv(t, host)
	p, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

// lpEnv points layerprobe at one private daemon, with its own lock file so
// parallel test packages do not wait on each other, and no config file.
func lpEnv(t *testing.T, host string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"DOCKER_HOST=" + host, "LAYERPROBE_LOCK_FILE=" + lockFile(t, host)}
	return env
}

var (
	lockDirOnce sync.Once
	lockDirPath string
	lockDirErr  error
)

// lockFile is the host-wide measurement lock of the tests that use the
// engine at host: one per private engine, so that tests on different
// engines can run in parallel (t.Parallel) while everything on one engine
// still takes turns, as on a real host. Tests that name their engines in a
// config file (containerd's) pass no host; each starts its own private
// engines, so the lock is the top-level test's: two such tests running at
// once must not find each other's lock held.
func lockFile(t *testing.T, host string) string {
	key := host
	if key == "" {
		key = "test-" + strings.SplitN(t.Name(), "/", 2)[0]
	}
	name := strings.NewReplacer("/", "_", ":", "_").Replace(key)
	return filepath.Join(lockDir(t), name+".lock")
}

// lockDir is made once, by whichever test asks first (parallel tests may
// ask at once), and removed by TestMain.
func lockDir(t *testing.T) string {
	lockDirOnce.Do(func() { lockDirPath, lockDirErr = os.MkdirTemp("", "lplock") })
	if lockDirErr != nil {
		t.Fatal(lockDirErr)
	}
	return lockDirPath
}

// apiClient talks to a daemon's socket directly, so the checks do not
// depend on layerprobe's own engine code or on a docker CLI.
type apiClient struct{ *testharness.Docker }

func newAPI(host string) apiClient { return apiClient{testharness.NewDocker(host)} }

func (a apiClient) get(t *testing.T, path string, v any) { a.Do(t, "GET", path, v) }

func (a apiClient) labelled(t *testing.T) testharness.Labelled { return a.Labelled(t) }
